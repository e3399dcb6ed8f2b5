// bind() for pack and unpack: the axes around `*` are shared by every tensor; the dims at `*` are
// concatenated (pack) or split into the parts the packed shapes give (unpack).
#include <algorithm>
#include <fmt/format.h>

#include "compiler/bind_common.hpp"
#include "compiler/checked.hpp"

namespace einc::detail {
namespace {

using syntax::Span;

class PackBinder {
public:
    PackBinder(const syntax::Pattern& pattern, const Call& call, std::span<const Shape> shapes)
        : pattern_(pattern), call_(call), shapes_(shapes), text_(pattern.text),
          op_(name_of(call.op)), tensors_{shapes, TensorNaming::tensor, call.sizes} {}

    Bound run() {
        check_pattern();
        check_no_sizes(call_, call_.op == Op::unpack ? "unpack takes the packed shapes that pack returned"
                                                     : "pack reads every size from its tensors");
        bound_.op = call_.op;
        bound_.pattern = pattern_;
        if (call_.op == Op::pack)
            bind_pack();
        else
            bind_unpack();
        return std::move(bound_);
    }

private:
    std::size_t rank() const { return pattern_.inputs.front().dims.size(); }
    const syntax::Atom& atom(std::size_t d) const { return pattern_.inputs.front().dims[d].atoms.front(); }

    void check_pattern() {
        const syntax::Star* star = nullptr;
        FirstOccurrences first(text_);
        const std::string in_pattern = fmt::format(" in the {} pattern", op_);
        for (std::size_t d = 0; d < rank(); ++d) {
            if (const auto* s = as<syntax::Star>(atom(d))) {
                if (star)
                    throw Error(ErrorKind::pattern, fmt::format("'*' appears twice in the {} pattern", op_))
                        .at(text_, s->span)
                        .also(star->span)
                        .help("one '*' marks where the packed dims go");
                star = s;
                star_ = d;
            } else if (std::optional<Error> repeated =
                           first.repeated(std::get<syntax::Name>(atom(d)), in_pattern)) {
                throw std::move(*repeated);
            }
        }
        if (!star)
            throw Error(ErrorKind::pattern, fmt::format("{} pattern has no '*'", op_))
                .at(text_, whole_pattern(text_))
                .help("'*' marks where the packed dims go, e.g. `b * c`");
        after_ = rank() - star_ - 1;
    }

    Error shape_error(std::string message) const { return tensors_.shape_error(std::move(message)); }

    // Axes before and after `*`, sized from the first tensor's shape (`at` maps pattern dim -> shape dim).
    void bind_named(const Shape& shape, std::size_t at_after) {
        for (std::size_t d = 0; d < rank(); ++d) {
            if (d == star_) continue;
            const auto& name = std::get<syntax::Name>(atom(d));
            const std::int64_t extent = shape[d < star_ ? d : at_after + (d - star_ - 1)];
            named_.push_back(add_axis(name.text, extent, AxisOrigin::named, name.span));
        }
    }

    AxisId add_axis(std::string name, std::int64_t size, AxisOrigin origin, Span span) {
        bound_.axes.push_back(Axis{std::move(name), size, origin, span});
        return static_cast<AxisId>(bound_.axes.size() - 1);
    }

    // The dims of a tensor with part `part` in place of `*` (or the concatenated dim if part is empty).
    BoundOperand operand(std::optional<std::size_t> part, std::int64_t concat_extent) const {
        BoundOperand op{{}, pattern_.inputs.front().span};
        for (std::size_t d = 0, named = 0; d < rank(); ++d) {
            const Span span = syntax::span_of(atom(d));
            if (d != star_) {
                const AxisId a = named_[named++];
                op.dims.push_back(BoundDim{{a}, bound_.size(a), span});
            } else if (!part) {
                op.dims.push_back(BoundDim{{}, concat_extent, span});
            } else {
                for (const AxisId a : bound_.concat->parts[*part])
                    op.dims.push_back(BoundDim{{a}, bound_.size(a), span});
            }
        }
        return op;
    }

    void add_part(const Shape& dims) {
        const Span star_span = syntax::span_of(atom(star_));
        std::vector<AxisId> part;
        const std::size_t index = bound_.concat->parts.size();
        for (std::size_t k = 0; k < dims.size(); ++k)
            part.push_back(add_axis(fmt::format("*{}.{}", index, k), dims[k], AxisOrigin::packed, star_span));
        bound_.concat->parts.push_back(std::move(part));
    }

    // Lengths are 0 or more and multiply to an int64, as every other operation checks.
    void check_shapes() const {
        for (std::size_t i = 0; i < shapes_.size(); ++i) tensors_.check_lengths(i);
    }

    void bind_pack() {
        if (shapes_.empty()) throw Error(ErrorKind::usage, "pack needs at least one tensor");
        check_shapes();
        const std::size_t fixed = rank() - 1;
        for (std::size_t i = 0; i < shapes_.size(); ++i)
            if (shapes_[i].size() < fixed)
                throw shape_error(fmt::format("tensor {} has {} dims, but `{}` needs at least {}", i,
                                              shapes_[i].size(), text_, fixed))
                    .at(text_, whole_pattern(text_));
        bind_named(shapes_[0], shapes_[0].size() - after_);
        bound_.concat = Concat{star_, {}, {}};
        std::int64_t offset = 0;
        for (std::size_t i = 0; i < shapes_.size(); ++i) {
            const Shape& shape = shapes_[i];
            for (std::size_t d = 0, named = 0; d < rank(); ++d) {
                if (d == star_) continue;
                const AxisId a = named_[named++];
                const std::int64_t extent = shape[d < star_ ? d : shape.size() - after_ + (d - star_ - 1)];
                if (extent != bound_.size(a))
                    throw shape_error(fmt::format("tensors 0 and {} disagree on axis '{}': {} vs {}", i,
                                                  bound_.axis(a).name, bound_.size(a), extent))
                        .at(text_, bound_.axis(a).span)
                        .help("pack concatenates along '*'; every other axis must have one length");
            }
            const Shape packed(shape.begin() + static_cast<std::ptrdiff_t>(star_),
                               shape.end() - static_cast<std::ptrdiff_t>(after_));
            add_part(packed);
            bound_.concat->offsets.push_back(offset);
            // (The product of the packed dims can overflow even where the tensor's cannot: a 0 elsewhere.)
            const std::optional<std::int64_t> length = checked_product(packed);
            const auto next = length ? checked_add(offset, *length) : std::nullopt;
            if (!next) throw shape_error("the packed dim has more elements than fit in 64 bits");
            offset = *next;
        }
        for (std::size_t i = 0; i < shapes_.size(); ++i) bound_.inputs.push_back(operand(i, 0));
        bound_.outputs.push_back(operand(std::nullopt, offset));
        check_total(bound_.outputs.front());
    }

    void bind_unpack() {
        check_one_tensor(call_, shapes_.size());
        check_shapes();
        const Shape& shape = shapes_[0];
        if (shape.size() != rank())
            throw shape_error(fmt::format("expected {} dims for `{}`, got {}", rank(), text_, shape.size()))
                .at(text_, whole_pattern(text_));
        const std::vector<Shape>& packed = call_.packed_shapes;
        if (packed.empty())
            throw Error(ErrorKind::usage, "unpack needs the packed shapes")
                .help("pass the shapes pack returned, one per part (CLI: --packed 2x3 --packed 4)");
        bind_named(shape, star_ + 1);
        const Span star_span = syntax::span_of(atom(star_));
        std::vector<std::string> shown;
        for (const Shape& p : packed) shown.push_back(fmt::format("[{}]", fmt::join(p, ", ")));
        // Lengths of the parts along the packed dim; one entry of one shape may be -1 (inferred).
        const std::int64_t total = shape[star_];
        std::optional<std::size_t> inferred_part;
        std::int64_t known_sum = 0;
        for (std::size_t p = 0; p < packed.size(); ++p) {
            const auto minus_ones = std::count(packed[p].begin(), packed[p].end(), -1);
            if (minus_ones > 1 || (minus_ones == 1 && inferred_part))
                throw shape_error(
                    fmt::format("more than one -1 in the packed shapes {}", fmt::join(shown, ", ")))
                    .at(text_, star_span)
                    .help("one length in one part can be inferred; give the others");
            if (std::any_of(packed[p].begin(), packed[p].end(), [](std::int64_t v) { return v < -1; }))
                throw shape_error(fmt::format("packed shape {} has a negative length", shown[p]))
                    .at(text_, star_span)
                    .help("lengths are 0 or more; -1 stands for one inferred length");
            if (minus_ones == 1) {
                inferred_part = p;
                continue;
            }
            const auto length = checked_product(packed[p]);
            const auto sum = length ? checked_add(known_sum, *length) : std::nullopt;
            if (!sum)
                throw Error(ErrorKind::shape, "the packed shapes have more elements than fit in 64 bits");
            known_sum = *sum;
        }
        std::vector<Shape> parts = packed;
        const auto cannot_split = [&](std::string help) {
            return shape_error(fmt::format("can't split dim {} of length {} into parts of shapes {}", star_,
                                           total, fmt::join(shown, ", ")))
                .at(text_, star_span)
                .help(std::move(help));
        };
        if (inferred_part) {
            Shape& part = parts[*inferred_part];
            std::vector<std::int64_t> known_lengths;
            for (const std::int64_t v : part)
                if (v != -1) known_lengths.push_back(v);
            const auto product = checked_product(known_lengths);
            if (!product)
                throw Error(ErrorKind::shape, "the packed shapes have more elements than fit in 64 bits");
            const std::int64_t others = *product;
            const std::int64_t rest = total - known_sum;
            if (rest < 0)
                throw cannot_split(
                    fmt::format("the other parts already hold {} of the {}", known_sum, total));
            if (others == 0 || rest % others != 0)
                throw cannot_split(fmt::format(
                    "the -1 part holds the remaining {}, which is not a multiple of {}", rest, others));
            *std::find(part.begin(), part.end(), -1) = rest / others;
        } else if (known_sum != total) {
            throw cannot_split(
                fmt::format("the parts hold {} in all, not {}; a -1 in one part lets einc infer its length",
                            known_sum, total));
        }
        bound_.concat = Concat{star_, {}, {}};
        std::int64_t offset = 0;
        for (const Shape& part : parts) {
            add_part(part);
            bound_.concat->offsets.push_back(offset);
            offset += *checked_product(part);
        }
        bound_.inputs.push_back(operand(std::nullopt, total));
        for (std::size_t p = 0; p < parts.size(); ++p) bound_.outputs.push_back(operand(p, 0));
        for (const BoundOperand& output : bound_.outputs) check_total(output);
    }

    void check_total(const BoundOperand& operand) const {
        if (!lengths_fit(operand.shape())) throw shape_error(too_many_elements("a result", operand.shape()));
    }

    const syntax::Pattern& pattern_;
    const Call& call_;
    std::span<const Shape> shapes_;
    std::string_view text_;
    std::string_view op_;
    Tensors tensors_;
    std::size_t star_ = 0, after_ = 0;
    std::vector<AxisId> named_;
    Bound bound_;
};

}  // namespace

Bound bind_pack(const syntax::Pattern& pattern, const Call& call, std::span<const Shape> shapes) {
    return PackBinder(pattern, call, shapes).run();
}

}  // namespace einc::detail
