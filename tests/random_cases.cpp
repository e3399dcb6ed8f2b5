#include "tests/random_cases.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <map>
#include <numeric>

#include "compiler/bind.hpp"
#include "compiler/layout.hpp"
#include "tests/reference/reference.hpp"

namespace einc::testing {
namespace {

struct AxisPick {
    std::string name;
    std::int64_t size;
};

int uniform(std::mt19937& rng, int low, int high) {
    return std::uniform_int_distribution<int>(low, high)(rng);
}
bool chance(std::mt19937& rng, double p) {
    return std::bernoulli_distribution(p)(rng);
}

// Distinct axes with sizes 1..4 (size 1 often enough to exercise unit handling).
std::vector<AxisPick> pick_axes(std::mt19937& rng, int count, const std::string& names = "abcdef") {
    std::string pool = names;
    std::shuffle(pool.begin(), pool.end(), rng);
    std::vector<AxisPick> axes;
    for (int i = 0; i < count && i < static_cast<int>(pool.size()); ++i)
        axes.push_back({std::string(1, pool[static_cast<std::size_t>(i)]), uniform(rng, 1, 4)});
    return axes;
}

// One side of a pattern over `axes` in a random order and grouping: dims of one axis, groups of two,
// unit dims `1` / `()`, and `...` (grouped as `(...)` if allowed) at a random position.
struct Side {
    std::string text;
    std::vector<std::vector<AxisPick>> dims;  // the named dims, in order (the ellipsis is not in here)
    std::size_t ellipsis_at = 0;              // position of `...` among the dims, if any
    bool has_ellipsis = false;
    std::vector<bool> units;  // per dim in `text` order: is it a unit dim
};

Side random_side(std::mt19937& rng, std::vector<AxisPick> axes, bool ellipsis, bool may_group_ellipsis,
                 bool shuffle = true) {
    if (shuffle) std::shuffle(axes.begin(), axes.end(), rng);
    Side side;
    std::vector<std::string> parts;
    for (std::size_t i = 0; i < axes.size();) {
        if (chance(rng, 0.1)) parts.push_back(chance(rng, 0.5) ? "1" : "()");
        const std::size_t group = (i + 1 < axes.size() && chance(rng, 0.35)) ? 2 : 1;
        std::vector<AxisPick> dim(axes.begin() + static_cast<std::ptrdiff_t>(i),
                                  axes.begin() + static_cast<std::ptrdiff_t>(i + group));
        parts.push_back(group == 1 ? dim[0].name : fmt::format("({} {})", dim[0].name, dim[1].name));
        side.dims.push_back(std::move(dim));
        i += group;
    }
    if (ellipsis) {
        side.has_ellipsis = true;
        side.ellipsis_at = static_cast<std::size_t>(uniform(rng, 0, static_cast<int>(side.dims.size())));
        // Insert among the parts at the position of the dim it precedes.
        std::size_t named = 0, at = parts.size();
        for (std::size_t p = 0; p < parts.size(); ++p) {
            if (named == side.ellipsis_at) {
                at = p;
                break;
            }
            if (parts[p] != "1" && parts[p] != "()") ++named;
        }
        parts.insert(parts.begin() + static_cast<std::ptrdiff_t>(at),
                     may_group_ellipsis && chance(rng, 0.3) ? "(...)" : "...");
    }
    side.text = fmt::format("{}", fmt::join(parts, " "));
    return side;
}

// The shape an input side describes, with `extra` dims for its ellipsis.
Shape shape_of(const std::string& text, const std::map<std::string, std::int64_t>& sizes,
               const Shape& extra) {
    Shape shape;
    std::int64_t group = 1;
    bool in_group = false;
    std::string word;
    const auto flush = [&] {
        if (word.empty()) return;
        const std::int64_t n = word == "1" ? 1 : sizes.at(word);
        if (in_group)
            group *= n;
        else
            shape.push_back(n);
        word.clear();
    };
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (c == '.') {
            shape.insert(shape.end(), extra.begin(), extra.end());
            i += 2;
        } else if (c == '(') {
            in_group = true;
            group = 1;
        } else if (c == ')') {
            flush();
            in_group = false;
            shape.push_back(group);
        } else if (c == ' ') {
            flush();
        } else {
            word += c;
        }
    }
    flush();
    return shape;
}

// Sizes given by name: every axis of a group but one (inference does the rest), sometimes all.
AxisSizes sizes_for_groups(std::mt19937& rng, const Side& side) {
    AxisSizes given;
    for (const auto& dim : side.dims) {
        if (dim.size() < 2) continue;
        const std::size_t unknown =
            static_cast<std::size_t>(uniform(rng, 0, static_cast<int>(dim.size()) - 1));
        for (std::size_t k = 0; k < dim.size(); ++k)
            if (k != unknown || chance(rng, 0.2)) given.push_back({dim[k].name, dim[k].size});
    }
    return given;
}

std::map<std::string, std::int64_t> size_map(const std::vector<AxisPick>& axes) {
    std::map<std::string, std::int64_t> sizes;
    for (const AxisPick& a : axes) sizes[a.name] = a.size;
    return sizes;
}

Shape random_extra(std::mt19937& rng) {
    Shape extra;
    for (int k = uniform(rng, 0, 2); k > 0; --k) extra.push_back(uniform(rng, 1, 3));
    return extra;
}

double random_value(std::mt19937& rng, DType dtype) {
    if (dtype == DType::boolean) return uniform(rng, 0, 1);
    return uniform(rng, -3, 3);
}

// A view of `shape` at a random place in a fresh buffer: permuted, padded, broadcast or reversed.
void add_input(std::mt19937& rng, RandomCase& c, const Shape& shape) {
    const std::size_t rank = shape.size();
    std::vector<std::size_t> order(rank);
    std::iota(order.begin(), order.end(), 0);
    if (chance(rng, 0.6)) std::shuffle(order.begin(), order.end(), rng);
    Shape strides(rank, 0);
    std::int64_t stride = 1;
    for (std::size_t k = rank; k-- > 0;) {  // row-major over the permuted dims, sometimes padded
        const std::size_t d = order[k];
        strides[d] = stride;
        stride *= std::max<std::int64_t>(shape[d], 1) + (chance(rng, 0.2) ? uniform(rng, 1, 2) : 0);
    }
    for (std::size_t d = 0; d < rank; ++d) {
        if (shape[d] > 1 && chance(rng, 0.08))
            strides[d] = 0;  // broadcast
        else if (shape[d] > 1 && chance(rng, 0.08))
            strides[d] = -strides[d];  // reversed
    }
    const OffsetRange range = offset_range(make_layout(shape, strides));
    const std::int64_t span = std::max<std::int64_t>(range.end - range.begin, 1);
    std::vector<double> values;
    for (std::int64_t i = 0; i < span * (is_complex(c.dtype) ? 2 : 1); ++i)  // (complex: real, imaginary)
        values.push_back(random_value(rng, c.dtype));
    c.storage.push_back(reference::make_tensor(c.dtype, Shape{span}, values));
    std::byte* origin = static_cast<std::byte*>(c.storage.back().data()) -
                        range.begin * static_cast<std::int64_t>(size_of(c.dtype));
    c.inputs.push_back(TensorView{origin, c.dtype, shape, strides});
}

const std::vector<Reduction> reductions{Reduction::sum,  Reduction::mean, Reduction::max, Reduction::min,
                                        Reduction::prod, Reduction::any,  Reduction::all};

void random_movement(std::mt19937& rng, RandomCase& c, Op op) {
    const std::vector<AxisPick> axes = pick_axes(rng, uniform(rng, 1, 4));
    const bool ellipsis = chance(rng, 0.3);
    const Side in = random_side(rng, axes, ellipsis, false);
    std::vector<AxisPick> out_axes = axes;
    std::vector<std::string> anonymous;
    if (op == Op::repeat) {
        for (const AxisPick& extra : pick_axes(rng, uniform(rng, 1, 2), "ghij")) {
            out_axes.push_back(extra);
            c.call.sizes.push_back({extra.name, extra.size});
        }
    }
    if (op == Op::reduce) {  // keep a random subset; the rest (and maybe the ellipsis) is reduced
        std::shuffle(out_axes.begin(), out_axes.end(), rng);
        out_axes.resize(static_cast<std::size_t>(uniform(rng, 0, static_cast<int>(out_axes.size()))));
    }
    const Side out = random_side(rng, out_axes, ellipsis && (op != Op::reduce || chance(rng, 0.5)), true);
    std::string right = out.text;
    if (op == Op::repeat && chance(rng, 0.3)) right += " 2";  // an anonymous new axis
    c.call.pattern = fmt::format("{} -> {}", in.text, right);
    const AxisSizes given = sizes_for_groups(rng, in);
    c.call.sizes.insert(c.call.sizes.end(), given.begin(), given.end());
    if (op == Op::reduce) {
        std::vector<Reduction> allowed;
        for (const Reduction r : reductions)  // mean of integers and bool too: numpy's, in f64
            if (!is_complex(c.dtype) || r == Reduction::sum || r == Reduction::mean ||
                r == Reduction::prod)  // (complex numbers have no order)
                allowed.push_back(r);
        c.call.reduction =
            allowed[static_cast<std::size_t>(uniform(rng, 0, static_cast<int>(allowed.size()) - 1))];
    }
    add_input(rng, c, shape_of(in.text, size_map(axes), random_extra(rng)));
}

void random_einsum(std::mt19937& rng, RandomCase& c) {
    const std::vector<AxisPick> pool = pick_axes(rng, uniform(rng, 2, 5));
    const int operands = uniform(rng, 1, 3);
    const bool ellipsis = chance(rng, 0.2);
    const Shape extra = random_extra(rng);
    std::vector<AxisPick> used;
    std::vector<std::string> texts;
    std::vector<Shape> shapes;
    for (int o = 0; o < operands; ++o) {
        std::vector<AxisPick> axes = pool;
        std::shuffle(axes.begin(), axes.end(), rng);
        axes.resize(
            static_cast<std::size_t>(uniform(rng, 1, std::min<int>(3, static_cast<int>(pool.size())))));
        if (operands == 1 && chance(rng, 0.3)) axes.push_back(axes.front());  // a diagonal
        std::vector<std::string> names;
        Shape shape;
        for (const AxisPick& a : axes) {
            names.push_back(a.name);
            shape.push_back(a.size);
            if (std::none_of(used.begin(), used.end(), [&](const AxisPick& u) { return u.name == a.name; }))
                used.push_back(a);
        }
        if (ellipsis) {  // `...` first, broadcasting from the right with some dims of length 1
            names.insert(names.begin(), "...");
            Shape own(extra.begin() + uniform(rng, 0, static_cast<int>(extra.size())), extra.end());
            for (std::int64_t& e : own)
                if (chance(rng, 0.2)) e = 1;
            shape.insert(shape.begin(), own.begin(), own.end());
        }
        texts.push_back(fmt::format("{}", fmt::join(names, " ")));
        shapes.push_back(shape);
    }
    std::shuffle(used.begin(), used.end(), rng);
    used.resize(static_cast<std::size_t>(uniform(rng, 0, static_cast<int>(used.size()))));
    std::vector<std::string> out;
    if (ellipsis) out.push_back("...");
    for (const AxisPick& a : used) out.push_back(a.name);
    if (out.size() >= 2 && !ellipsis && chance(rng, 0.15)) {  // a composite output dim (einc extension)
        out[0] = fmt::format("({} {})", out[0], out[1]);
        out.erase(out.begin() + 1);
    }
    c.call.pattern = fmt::format("{} -> {}", fmt::join(texts, ", "), fmt::join(out, " "));
    for (const Shape& shape : shapes) add_input(rng, c, shape);
}

void random_pack(std::mt19937& rng, RandomCase& c, Op op) {
    const std::vector<AxisPick> named = pick_axes(rng, uniform(rng, 0, 2));
    const std::size_t before = static_cast<std::size_t>(uniform(rng, 0, static_cast<int>(named.size())));
    std::vector<std::string> names;
    for (std::size_t i = 0; i < named.size(); ++i) {
        if (i == before) names.push_back("*");
        names.push_back(named[i].name);
    }
    if (before == named.size()) names.push_back("*");
    c.call.pattern = fmt::format("{}", fmt::join(names, " "));
    std::vector<Shape> parts;
    for (int t = uniform(rng, 1, 3); t > 0; --t) {
        Shape part;
        for (int k = uniform(rng, 0, 2); k > 0; --k) part.push_back(uniform(rng, 1, 3));
        parts.push_back(part);
    }
    const auto with_named = [&](const Shape& middle) {
        Shape shape;
        for (std::size_t i = 0; i < before; ++i) shape.push_back(named[i].size);
        shape.insert(shape.end(), middle.begin(), middle.end());
        for (std::size_t i = before; i < named.size(); ++i) shape.push_back(named[i].size);
        return shape;
    };
    if (op == Op::pack) {
        for (const Shape& part : parts) add_input(rng, c, with_named(part));
        return;
    }
    std::int64_t total = 0;
    for (const Shape& part : parts) {
        std::int64_t n = 1;
        for (const std::int64_t e : part) n *= e;
        total += n;
    }
    c.call.packed_shapes = parts;
    if (chance(rng, 0.3) && !parts.back().empty()) c.call.packed_shapes.back().front() = -1;
    add_input(rng, c, with_named(Shape{total}));
}

}  // namespace

RandomCase random_case(std::mt19937& rng, Op op, DType dtype) {
    RandomCase c;
    c.dtype = dtype;
    c.call.op = op;
    switch (op) {
    case Op::rearrange:
    case Op::reduce:
    case Op::repeat: random_movement(rng, c, op); break;
    case Op::einsum: random_einsum(rng, c); break;
    case Op::pack:
    case Op::unpack: random_pack(rng, c, op); break;
    case Op::parse_shape: break;
    }
    return c;
}

Planned bind_and_plan(const Call& call, std::span<const TensorView> inputs, const PlanOptions& options) {
    std::vector<Shape> shapes;
    std::vector<TensorSpec> specs;
    for (const TensorView& input : inputs) {
        shapes.push_back(input.shape);
        specs.push_back(TensorSpec{input.dtype, input.shape, input.strides});
    }
    Bound bound = bind(call, shapes);
    Plan planned = plan(bound, specs, options);
    return Planned{std::move(bound), std::move(planned)};
}

RandomCase random_mixed_case(std::mt19937& rng, Op op, std::span<const DType> dtypes) {
    RandomCase c = random_case(rng, op, DType::i8);
    for (std::size_t k = 0; k < c.inputs.size(); ++k) {
        const DType dtype =
            dtypes[static_cast<std::size_t>(uniform(rng, 0, static_cast<int>(dtypes.size()) - 1))];
        if (dtype == c.inputs[k].dtype) continue;
        // (replacing storage k: input k lives in storage k, which tests that copy it rely on)
        std::vector<double> values = reference::values_of(c.inputs[k]);
        if (is_complex(dtype)) {  // an imaginary part beside each value: (v, 1 - v)
            std::vector<double> pairs;
            for (const double v : values) pairs.insert(pairs.end(), {v, 1 - v});
            values = std::move(pairs);
        }
        c.storage[k] = reference::make_tensor(dtype, c.inputs[k].shape, values);
        c.inputs[k] = c.storage[k].view();
    }
    return c;
}

std::string RandomCase::describe() const {
    std::string text = format_call(call);
    for (const TensorView& input : inputs) text += fmt::format(" {}", einc::describe(input));
    return text;
}

bool same_values(const TensorView& got, const TensorView& expected, std::string* difference) {
    if (got.shape != expected.shape || got.dtype != expected.dtype) {
        if (difference)
            *difference = fmt::format("got {}, expected {}", einc::describe(got), einc::describe(expected));
        return false;
    }
    const std::vector<double> a = reference::values_of(got), b = reference::values_of(expected);
    // (c64: products of tens of terms of both parts round beyond f32's 1e-6; each part is held to the
    // magnitude of its element, as cancellation can leave one part small)
    const bool complex = is_complex(got.dtype);
    const double tolerance = got.dtype == DType::f32 || got.dtype == DType::f64 || got.dtype == DType::c128
                                 ? 1e-6
                             : got.dtype == DType::c64 ? 1e-5
                             : is_floating(got.dtype)  ? 2e-2
                                                       : 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i]))) continue;  // (infinities too)
        const double magnitude =
            complex ? std::max(std::fabs(b[i & ~std::size_t{1}]), std::fabs(b[i | 1])) : std::fabs(b[i]);
        if (std::fabs(a[i] - b[i]) <= tolerance * std::max(1.0, magnitude)) continue;
        if (difference)
            *difference = fmt::format("element {} (row-major): got {}, expected {}", i, a[i], b[i]);
        return false;
    }
    return true;
}

}  // namespace einc::testing
