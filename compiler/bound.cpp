#include "compiler/bound.hpp"

#include <fmt/format.h>

namespace einc {

Shape BoundOperand::shape() const {
    Shape shape;
    for (const BoundDim& dim : dims) shape.push_back(dim.extent);
    return shape;
}

AxisSizes parsed_shape(const Bound& bound) {
    AxisSizes sizes;
    for (const Axis& axis : bound.axes)
        if (axis.origin == AxisOrigin::named) sizes.push_back({axis.name, axis.size});
    return sizes;
}

std::vector<Shape> packed_shapes(const Bound& bound) {
    std::vector<Shape> shapes;
    for (const std::vector<AxisId>& part : bound.concat->parts) {
        Shape shape;
        for (const AxisId a : part) shape.push_back(bound.size(a));
        shapes.push_back(std::move(shape));
    }
    return shapes;
}

namespace {

std::string axis_list(const Bound& bound, const std::vector<AxisId>& axes) {
    std::vector<std::string> names;
    for (const AxisId a : axes) names.push_back(bound.axis(a).name);
    return fmt::format("{}", fmt::join(names, " "));
}

std::string print_dims(const Bound& bound, const BoundOperand& operand, bool packed) {
    std::vector<std::string> dims;
    for (std::size_t d = 0; d < operand.dims.size(); ++d) {
        const BoundDim& dim = operand.dims[d];
        if (packed && d == bound.concat->dim) {
            std::vector<std::string> parts;
            for (const auto& part : bound.concat->parts) parts.push_back(axis_list(bound, part));
            dims.push_back(fmt::format("[{}]", fmt::join(parts, " | ")));
        } else if (dim.axes.size() == 1) {
            dims.push_back(bound.axis(dim.axes.front()).name);
        } else {
            dims.push_back(fmt::format("({})", axis_list(bound, dim.axes)));
        }
    }
    return dims.empty() ? "(scalar)" : fmt::format("{}", fmt::join(dims, "  "));
}

}  // namespace

std::string print_bound(const Bound& bound) {
    std::string out = fmt::format("bound {}\n", name_of(bound.op));
    std::vector<std::string> axes;
    for (const Axis& axis : bound.axes) axes.push_back(fmt::format("{}={}", axis.name, axis.size));
    out += fmt::format("  axes  {}\n", axes.empty() ? "(none)" : fmt::format("{}", fmt::join(axes, "  ")));

    struct Row {
        std::string label, shape, dims;
    };
    std::vector<Row> rows;
    const bool packed_input = bound.op == Op::unpack, packed_output = bound.op == Op::pack;
    for (std::size_t i = 0; i < bound.inputs.size(); ++i)
        rows.push_back({bound.inputs.size() == 1 ? "in" : fmt::format("in {}", i),
                        format_shape(bound.inputs[i].shape()),
                        print_dims(bound, bound.inputs[i], packed_input)});
    for (std::size_t i = 0; i < bound.outputs.size(); ++i)
        rows.push_back({bound.outputs.size() == 1 ? "out" : fmt::format("out {}", i),
                        format_shape(bound.outputs[i].shape()),
                        print_dims(bound, bound.outputs[i], packed_output)});
    std::size_t label_width = 4, shape_width = 0;
    for (const Row& row : rows) {
        label_width = std::max(label_width, row.label.size() + 2);
        shape_width = std::max(shape_width, row.shape.size());
    }
    for (const Row& row : rows)
        out += fmt::format("  {:<{}}{:<{}}  {}\n", row.label, label_width, row.shape, shape_width, row.dims);

    if (!bound.reduced.empty()) {
        const char* verb = bound.op == Op::einsum ? "summed" : "reduced";
        out += fmt::format("  {}  {}{}\n", verb, axis_list(bound, bound.reduced),
                           bound.op == Op::reduce ? fmt::format("  ({})", name_of(bound.reduction)) : "");
    }
    if (!bound.broadcast.empty()) out += fmt::format("  repeated  {}\n", axis_list(bound, bound.broadcast));
    return out;
}

}  // namespace einc
