#include "runtime/dims.hpp"

#include <algorithm>
#include <fmt/format.h>

#include "compiler/bind.hpp"
#include "grammar/diagnostic.hpp"

namespace einc {

void dims::check(const TensorView& tensor, std::string_view pattern) {
    const Call call{Op::parse_shape, std::string(pattern), Reduction::none, {}, false, {}};
    const std::vector<Shape> shapes{tensor.shape};
    const Bound bound = bind(call, shapes);
    for (const Axis& axis : bound.axes) {
        if (axis.origin != AxisOrigin::named) continue;
        const auto known = std::find_if(bindings_.begin(), bindings_.end(),
                                        [&](const Binding& b) { return b.name == axis.name; });
        if (known == bindings_.end()) {
            bindings_.push_back(Binding{axis.name, axis.size, std::string(pattern), axis.span.begin,
                                        axis.span.end, tensor.shape});
            continue;
        }
        if (known->size == axis.size) continue;
        throw Error(ErrorKind::shape,
                    fmt::format("axis '{}' is {} here, but was {} before", axis.name, axis.size, known->size))
            .at(pattern, axis.span)
            .note(fmt::format("this tensor has shape {}", format_shape(tensor.shape)))
            .note(fmt::format("'{}' was bound to {} by `{}` on a tensor of shape {}", known->name,
                              known->size, known->pattern, format_shape(known->shape)))
            .help("every check of one einc::dims must agree on each axis name");
    }
}

bool dims::contains(std::string_view name) const {
    return std::any_of(bindings_.begin(), bindings_.end(), [&](const Binding& b) { return b.name == name; });
}

std::int64_t dims::operator[](std::string_view name) const {
    for (const Binding& b : bindings_)
        if (b.name == name) return b.size;
    throw Error(ErrorKind::usage, fmt::format("axis '{}' was never bound by a check", name));
}

AxisSizes dims::sizes() const {
    AxisSizes out;
    for (const Binding& b : bindings_) out.push_back({b.name, b.size});
    return out;
}

}  // namespace einc
