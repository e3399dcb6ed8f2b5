// The Python module `einc`: einops' functions with einops' names and signatures, run by einc's one-line
// calls (their plan cache included), on numpy arrays and anything else with __dlpack__.
//
//   import einc, numpy as np
//   y = einc.rearrange(np.ones((2, 3, 4)), "b h w -> b w h")   # a view of the input, as numpy's transpose
//   print(einc.explain("einsum", q, k, "b i d, b j d -> b i j"))
//
// A result is of the input's library (numpy in, numpy out); a result the plan makes a view shares the
// input's memory. einc::Error becomes einc.EincError (a ValueError) with einc's message and its caret.
#include <algorithm>
#include <cstdint>
#include <fmt/format.h>
#include <memory>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "compiler/plan.hpp"
#include "grammar/diagnostic.hpp"
#include "runtime/api.hpp"
#include "runtime/dims.hpp"
#include "runtime/gradient.hpp"

namespace nb = nanobind;

namespace {

// The library a tensor comes from: results are returned as its tensors.
enum class Framework { numpy, torch, jax, cupy, other };

// Read from the type's module, once per type: the attribute lookup would cost more than a cached call.
Framework framework_of(nb::handle tensor) {
    static std::vector<std::pair<PyTypeObject*, Framework>> known;  // guarded by the GIL
    PyTypeObject* type = Py_TYPE(tensor.ptr());
    for (const auto& [seen, framework] : known)
        if (seen == type) return framework;
    const std::string module =
        nb::cast<std::string>(nb::handle(reinterpret_cast<PyObject*>(type)).attr("__module__"));
    const std::string root = module.substr(0, module.find('.'));
    const Framework framework = root == "numpy"                     ? Framework::numpy
                                : root == "torch"                   ? Framework::torch
                                : root == "jax" || root == "jaxlib" ? Framework::jax
                                : root == "cupy"                    ? Framework::cupy
                                                                    : Framework::other;
    Py_INCREF(type);  // kept alive, so that the pointer is never another type's
    known.emplace_back(type, framework);
    return framework;
}

constexpr const char* dtypes_taken =
    "einc takes float64 float32 float16 bfloat16 int8 int16 int32 int64 uint8 uint16 uint32 uint64 complex64 "
    "complex128 bool";

einc::DType dtype_of(nb::dlpack::dtype dtype) {
    using Code = nb::dlpack::dtype_code;
    const auto code = static_cast<Code>(dtype.code);
    if (dtype.lanes == 1) {
        if (code == Code::Float && dtype.bits == 64) return einc::DType::f64;
        if (code == Code::Float && dtype.bits == 32) return einc::DType::f32;
        if (code == Code::Float && dtype.bits == 16) return einc::DType::f16;
        if (code == Code::Bfloat && dtype.bits == 16) return einc::DType::bf16;
        if (code == Code::Int && dtype.bits == 8) return einc::DType::i8;
        if (code == Code::Int && dtype.bits == 16) return einc::DType::i16;
        if (code == Code::Int && dtype.bits == 32) return einc::DType::i32;
        if (code == Code::Int && dtype.bits == 64) return einc::DType::i64;
        if (code == Code::UInt && dtype.bits == 8) return einc::DType::u8;
        if (code == Code::UInt && dtype.bits == 16) return einc::DType::u16;
        if (code == Code::UInt && dtype.bits == 32) return einc::DType::u32;
        if (code == Code::UInt && dtype.bits == 64) return einc::DType::u64;
        if (code == Code::Complex && dtype.bits == 64) return einc::DType::c64;
        if (code == Code::Complex && dtype.bits == 128) return einc::DType::c128;
        if (code == Code::Bool && dtype.bits == 8) return einc::DType::boolean;
    }
    const char* kind = code == Code::Int       ? "int"
                       : code == Code::UInt    ? "uint"
                       : code == Code::Float   ? "float"
                       : code == Code::Bfloat  ? "bfloat"
                       : code == Code::Complex ? "complex"
                       : code == Code::Bool    ? "bool"
                                               : nullptr;
    std::string name =
        kind ? fmt::format("{}{}", kind, dtype.bits)
             : fmt::format("DLPack type code {}, {}-bit", static_cast<int>(dtype.code), dtype.bits);
    if (dtype.lanes != 1) name += fmt::format(" x {} lanes", dtype.lanes);
    throw einc::Error(einc::ErrorKind::usage, fmt::format("einc does not take {} tensors", name))
        .help(dtypes_taken);
}

nb::dlpack::dtype dlpack_of(einc::DType dtype) {
    using Code = nb::dlpack::dtype_code;
    const auto of = [](Code code, int bits) {
        return nb::dlpack::dtype{static_cast<std::uint8_t>(code), static_cast<std::uint8_t>(bits), 1};
    };
    switch (dtype) {
    case einc::DType::f64: return of(Code::Float, 64);
    case einc::DType::f32: return of(Code::Float, 32);
    case einc::DType::f16: return of(Code::Float, 16);
    case einc::DType::bf16: return of(Code::Bfloat, 16);
    case einc::DType::f8e4m3: return of(Code::Float8_E4M3FN, 8);
    case einc::DType::f8e5m2: return of(Code::Float8_E5M2, 8);
    case einc::DType::i8: return of(Code::Int, 8);
    case einc::DType::i16: return of(Code::Int, 16);
    case einc::DType::i32: return of(Code::Int, 32);
    case einc::DType::i64: return of(Code::Int, 64);
    case einc::DType::u8: return of(Code::UInt, 8);
    case einc::DType::u16: return of(Code::UInt, 16);
    case einc::DType::u32: return of(Code::UInt, 32);
    case einc::DType::u64: return of(Code::UInt, 64);
    case einc::DType::c64: return of(Code::Complex, 64);
    case einc::DType::c128: return of(Code::Complex, 128);
    case einc::DType::boolean: return of(Code::Bool, 8);
    }
    throw std::logic_error("unknown dtype");
}

// An operand that is a torch tensor requiring grad: the call is recorded by a torch.autograd.Function
// instead (or_recorded), which runs einc on detached tensors.
struct RecordsGradient {};

// A Python tensor as einc reads it. `array` holds the DLPack import alive while einc runs.
struct Operand {
    nb::handle object;
    nb::ndarray<nb::ro> array;
    bool read_only = false;
    einc::TensorView view;
};

// The operands of one call, and what their results are returned as.
struct Operands {
    std::vector<Operand> operands;
    std::vector<einc::Input> inputs;  // their views, as einc's calls take them
    Framework framework = Framework::numpy;
    bool is_list = false;  // rearrange, reduce and repeat stack a list into one tensor
};

// torch's dtypes (singletons, kept) as einc's by their names ("torch.float32": numpy's names), looked up by
// identity after the first time; null where einc has none.
std::optional<einc::DType> torch_dtype(nb::handle dtype) {
    static std::vector<std::pair<nb::object, std::optional<einc::DType>>> seen;  // guarded by the GIL
    for (const auto& [object, einc_dtype] : seen)
        if (object.is(dtype)) return einc_dtype;
    std::string name = nb::cast<std::string>(nb::str(dtype));
    name.erase(0, name.find('.') + 1);
    return seen.emplace_back(nb::borrow(dtype), einc::dtype_named(name)).second;
}

// The names of the torch attributes einc reads, made once and interned: attr("name") would make a new
// string each call (10 of them a call).
struct TorchNames {
    static nb::object named(const char* name) { return nb::steal(PyUnicode_InternFromString(name)); }
    nb::object requires_grad = named("requires_grad"), dtype = named("dtype"), layout = named("layout"),
               is_neg = named("is_neg"), is_conj = named("is_conj"), is_cuda = named("is_cuda"),
               data_ptr = named("data_ptr"), shape = named("shape"), stride = named("stride"),
               as_strided = named("as_strided");
};
const TorchNames& torch_names() {
    static const TorchNames* names = new TorchNames;  // (never freed: it would outlive the interpreter)
    return *names;
}

// A torch tensor read from its attributes: a quarter of the host time of an import through __dlpack__
// (0.5 us against 3.2 here). A tensor with torch's lazy negation or conjugation bit, or not strided, is
// an error, as torch's own __dlpack__ makes it: its memory does not hold its values.
Operand torch_operand_of(nb::handle object) {
    const TorchNames& names = torch_names();
    if (nb::cast<bool>(object.attr(names.requires_grad))) throw RecordsGradient{};
    Operand operand;
    operand.object = object;
    einc::TensorView& view = operand.view;
    const nb::object dtype = object.attr(names.dtype);
    const std::optional<einc::DType> einc_dtype = torch_dtype(dtype);
    if (!einc_dtype)
        throw einc::Error(einc::ErrorKind::usage,
                          fmt::format("einc does not take {} tensors", nb::cast<std::string>(nb::str(dtype))))
            .help(dtypes_taken);
    view.dtype = *einc_dtype;
    static const nb::object strided = nb::module_::import_("torch").attr("strided");  // (never freed)
    if (!object.attr(names.layout).is(strided) || nb::cast<bool>(object.attr(names.is_neg)()))
        throw einc::Error(einc::ErrorKind::usage, "einc takes strided torch tensors without a negation bit")
            .help("call .resolve_neg() (or .to_dense()) first");
    if (einc::is_complex(view.dtype) && nb::cast<bool>(object.attr(names.is_conj)()))
        throw einc::Error(einc::ErrorKind::usage,
                          "einc takes complex torch tensors without a conjugation bit")
            .help("call .resolve_conj() first (torch's .conj() only marks the tensor)");
    if (nb::cast<bool>(object.attr(names.is_cuda))) {
        view.device = einc::Device::cuda;
        view.device_index = nb::cast<int>(object.attr("get_device")());
    } else if (!nb::cast<bool>(object.attr("is_cpu"))) {
        throw einc::Error(einc::ErrorKind::unsupported,
                          fmt::format("einc takes tensors on the CPU or a CUDA GPU, not on torch's {}",
                                      nb::cast<std::string>(object.attr("device").attr("type"))));
    }
    view.data = reinterpret_cast<void*>(nb::cast<std::uintptr_t>(object.attr(names.data_ptr)()));
    for (nb::handle length : object.attr(names.shape)) view.shape.push_back(nb::cast<std::int64_t>(length));
    for (nb::handle stride : object.attr(names.stride)())
        view.strides.push_back(nb::cast<std::int64_t>(stride));
    return operand;
}

Operand operand_of(nb::handle object) {
    if (framework_of(object) == Framework::torch) return torch_operand_of(object);
    Operand operand;
    operand.object = object;
    // Writable first: a view of a writable array is writable, as numpy's views are. Never converted: a
    // copy would break the views that share the input's memory.
    nb::ndarray<> writable;
    if (nb::try_cast(object, writable, /*convert=*/false)) {
        operand.array = nb::ndarray<nb::ro>(writable);
    } else if (nb::try_cast(object, operand.array, /*convert=*/false)) {
        operand.read_only = true;
    } else {
        const std::string type = nb::cast<std::string>(
            nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(object.ptr()))).attr("__qualname__"));
        if (!nb::hasattr(object, "__dlpack__"))
            throw nb::type_error(
                fmt::format("einc takes numpy arrays and tensors with __dlpack__, not {}", type).c_str());
        // (its library refused to export it: most often a dtype DLPack has no code for, as complex256)
        const nb::object dtype = nb::getattr(object, "dtype", nb::none());
        throw einc::Error(
            einc::ErrorKind::usage,
            fmt::format("einc could not read this {}{} through __dlpack__", type,
                        dtype.is_none() ? "" : " of dtype " + nb::cast<std::string>(nb::str(dtype))))
            .help(dtypes_taken);
    }
    const nb::ndarray<nb::ro>& array = operand.array;
    einc::TensorView& view = operand.view;
    view.data = const_cast<void*>(static_cast<const void*>(array.data()));  // einc never writes its inputs
    view.dtype = dtype_of(array.dtype());
    for (std::size_t d = 0; d < array.ndim(); ++d) {
        view.shape.push_back(static_cast<std::int64_t>(array.shape(d)));
        view.strides.push_back(array.stride(d));
    }
    if (array.device_type() == nb::device::cuda::value) {
        view.device = einc::Device::cuda;
    } else if (array.device_type() != nb::device::cpu::value) {
        throw einc::Error(einc::ErrorKind::unsupported,
                          fmt::format("einc takes tensors on the CPU or a CUDA GPU, not on DLPack device {}",
                                      array.device_type()));
    }
    view.device_index = array.device_id();
    return operand;
}

// One tensor, or a list or tuple of tensors stacked along a new first axis, as einops takes them.
Operands operands_of(nb::handle tensor_or_list, std::string_view op) {
    Operands result;
    result.is_list = nb::isinstance<nb::list>(tensor_or_list) || nb::isinstance<nb::tuple>(tensor_or_list);
    if (!result.is_list) {
        result.operands.push_back(operand_of(tensor_or_list));
    } else {
        for (nb::handle element : tensor_or_list) result.operands.push_back(operand_of(element));
        if (result.operands.empty())
            throw einc::Error(einc::ErrorKind::usage, fmt::format("{} of an empty list of tensors", op));
    }
    result.framework = framework_of(result.operands.front().object);
    for (const Operand& operand : result.operands) result.inputs.emplace_back(operand.view);
    return result;
}

// Stacks a list into one tensor (pack with `*` first: each tensor contributes no dim to it).
void stack(Operands& operands) {
    if (!operands.is_list) return;
    std::string pattern = "*";
    for (std::size_t d = 0; d < operands.inputs.front().view().rank(); ++d) pattern += fmt::format(" d{}", d);
    einc::Packed packed;
    {
        nb::gil_scoped_release unlocked;
        packed = einc::pack(operands.inputs, pattern);
    }
    operands.inputs = {einc::Input(packed.tensor)};
}

einc::AxisSizes sizes_of(const nb::kwargs& axes_lengths) {
    einc::AxisSizes sizes;
    for (const auto& [name, length] : axes_lengths)
        sizes.push_back({nb::cast<std::string>(name), nb::cast<std::int64_t>(length)});
    return sizes;
}

// Whether `address` is that of one of the view's elements' bytes, or within their span (any strides).
bool holds(const einc::TensorView& view, const void* address) {
    std::int64_t lowest = 0, highest = 0;
    for (std::size_t d = 0; d < view.rank(); ++d) {
        if (view.shape[d] == 0) return false;
        const std::int64_t reach = (view.shape[d] - 1) * view.strides[d];
        (reach < 0 ? lowest : highest) += reach;
    }
    const auto size = static_cast<std::int64_t>(einc::size_of(view.dtype));
    const auto* base = static_cast<const std::byte*>(view.data);
    const auto* at = static_cast<const std::byte*>(address);
    return at >= base + lowest * size && at < base + (highest + 1) * size;
}

template <typename... Config>
nb::object exported(const einc::Tensor& result, nb::handle owner, Framework framework) {
    const einc::TensorView& view = result.view();
    std::vector<std::size_t> shape(view.shape.begin(), view.shape.end());
    const int device = view.device == einc::Device::cuda ? nb::device::cuda::value : nb::device::cpu::value;
    const nb::ndarray<Config...> array(result.data(), shape.size(), shape.data(), owner, view.strides.data(),
                                       dlpack_of(view.dtype), device, view.device_index);
    switch (framework) {
    case Framework::numpy: return nb::cast(nb::ndarray<nb::numpy, Config...>(array.handle()));
    case Framework::torch: return nb::cast(nb::ndarray<nb::pytorch, Config...>(array.handle()));
    case Framework::jax: return nb::cast(nb::ndarray<nb::jax, Config...>(array.handle()));
    case Framework::cupy: return nb::cast(nb::ndarray<nb::cupy, Config...>(array.handle()));
    case Framework::other: return nb::cast(nb::ndarray<nb::array_api, Config...>(array.handle()));
    }
    throw std::logic_error("unknown framework");
}

// A view of a torch operand as torch's own as_strided view of it: half the host time of an export through
// DLPack, and the result is a view in torch's eyes too (its ._base, its version counter).
nb::object torch_view(const einc::TensorView& view, const Operand& viewed) {
    const auto size = static_cast<std::int64_t>(einc::size_of(view.dtype));
    const std::int64_t offset =
        (static_cast<const std::byte*>(view.data) - static_cast<const std::byte*>(viewed.view.data)) / size;
    nb::list shape, strides;
    for (std::size_t d = 0; d < view.rank(); ++d) {
        shape.append(view.shape[d]);
        strides.append(view.strides[d]);
    }
    const nb::handle tensor = viewed.object;
    if (offset == 0)  // (a rearrange's view always: torch keeps the tensor's own offset, 0.5 us sooner)
        return tensor.attr(torch_names().as_strided)(shape, strides);
    return tensor.attr("as_strided")(shape, strides,
                                     nb::cast<std::int64_t>(tensor.attr("storage_offset")()) + offset);
}

// A result as the operands' library's tensor. A fresh result owns its memory (through a capsule); a view
// is owned by the Python tensor it views, and on numpy is read-only where that tensor is, or where it
// repeats an element (a stride of 0), as numpy's broadcast_to is.
nb::object to_python(const einc::Tensor& result, const Operands& operands) {
    nb::object owner;
    bool read_only = false;
    if (result.storage()) {
        owner = nb::capsule(new std::shared_ptr<void>(result.storage()), [](void* storage) noexcept {
            delete static_cast<std::shared_ptr<void>*>(storage);
        });
    } else {
        const Operand* viewed = &operands.operands.front();
        for (const Operand& operand : operands.operands)
            if (holds(operand.view, result.data())) viewed = &operand;
        if (operands.framework == Framework::torch) return torch_view(result.view(), *viewed);
        owner = nb::borrow(viewed->object);
        read_only = viewed->read_only;
    }
    for (std::size_t d = 0; d < result.view().rank(); ++d)
        read_only = read_only || (result.view().strides[d] == 0 && result.view().shape[d] > 1);
    // (numpy's flag only: torch has none - its expand() is a stride-0 view too - and may refuse a
    // read-only DLPack tensor.)
    return read_only && operands.framework == Framework::numpy
               ? exported<nb::ro>(result, owner, operands.framework)
               : exported<>(result, owner, operands.framework);
}

// torch's current CUDA stream on the operands' device where they are CUDA torch tensors, so that einc's
// kernels are ordered with the caller's torch work as a torch op's are; else null (the default stream).
void* stream_of(const Operands& operands) {
    if (operands.framework != Framework::torch || operands.inputs.empty()) return nullptr;
    const einc::TensorView& view = operands.inputs.front().view();
    if (view.device != einc::Device::cuda) return nullptr;
    const nb::object stream = nb::module_::import_("torch.cuda").attr("current_stream")(view.device_index);
    return reinterpret_cast<void*>(nb::cast<std::uintptr_t>(stream.attr("cuda_stream")));
}

// One call as einc's plan cache keys it, with its operands.
struct Call {
    einc::Op op = einc::Op::rearrange;
    std::string pattern;
    einc::Reduction reduction = einc::Reduction::none;
    einc::AxisSizes sizes;
    std::vector<einc::Shape> packed_shapes;
    Operands operands;

    einc::Program program() const {
        const einc::CallRef ref{op,     pattern, reduction,
                                &sizes, false,   op == einc::Op::unpack ? &packed_shapes : nullptr};
        // JAX imports no broadcast (stride 0) through DLPack, and its arrays are immutable: fresh results.
        einc::Options options;
        options.contiguous = operands.framework == Framework::jax;
        return einc::default_plan_cache().get(ref, operands.inputs, options);
    }
    // The GIL is released while einc computes, not for a plan that only views its inputs (releasing
    // and taking it back would cost more than the view), nor while the plan is found or made (as
    // einops holds it for its recipes).
    std::vector<einc::Tensor> run() const {
        void* stream = stream_of(operands);
        const einc::Program found = program();
        const auto& steps = found.plan().steps;
        if (std::all_of(steps.begin(), steps.end(),
                        [](const einc::PlanStep& s) { return std::holds_alternative<einc::View>(s.step); }))
            return found.run(operands.inputs, stream);
        nb::gil_scoped_release unlocked;
        return found.run(operands.inputs, stream);
    }
};

std::vector<einc::Shape> shapes_of(nb::handle packed_shapes) {
    std::vector<einc::Shape> shapes;
    for (nb::handle shape : packed_shapes) {
        einc::Shape& dims = shapes.emplace_back();
        for (nb::handle length : shape) dims.push_back(nb::cast<std::int64_t>(length));
    }
    return shapes;
}

// The calls, each from its Python arguments as einops takes them.
// rearrange, reduce, repeat: one tensor, or a list of them stacked into one.
Call single_call(einc::Op op, einc::Reduction reduction, nb::handle tensor, std::string pattern,
                 const nb::kwargs& axes_lengths) {
    Call call{op,        std::move(pattern),
              reduction, sizes_of(axes_lengths),
              {},        operands_of(tensor, einc::name_of(op))};
    stack(call.operands);
    return call;
}

Call rearrange_call(nb::handle tensor, std::string pattern, const nb::kwargs& axes_lengths) {
    return single_call(einc::Op::rearrange, einc::Reduction::none, tensor, std::move(pattern), axes_lengths);
}

// (einops' reduce also takes "rearrange", for a call that reduces no axis: its rearrange runs that way.)
Call reduce_call(nb::handle tensor, std::string pattern, const std::string& reduction,
                 const nb::kwargs& axes_lengths) {
    if (reduction == "rearrange") return rearrange_call(tensor, std::move(pattern), axes_lengths);
    return single_call(einc::Op::reduce, einc::reduction_or_error(reduction), tensor, std::move(pattern),
                       axes_lengths);
}

Call repeat_call(nb::handle tensor, std::string pattern, const nb::kwargs& axes_lengths) {
    return single_call(einc::Op::repeat, einc::Reduction::none, tensor, std::move(pattern), axes_lengths);
}

// einsum(*tensors, pattern): the pattern comes last, as in einops.
Call einsum_call(const nb::args& tensors_and_pattern) {
    const std::size_t count = tensors_and_pattern.size();
    if (count < 2 || !nb::isinstance<nb::str>(tensors_and_pattern[count - 1]))
        throw nb::type_error("einsum(*tensors, pattern): one or more tensors, then the pattern");
    Call call{einc::Op::einsum,
              nb::cast<std::string>(tensors_and_pattern[count - 1]),
              einc::Reduction::none,
              {},
              {},
              {}};
    for (std::size_t i = 0; i + 1 < count; ++i)
        call.operands.operands.push_back(operand_of(tensors_and_pattern[i]));
    call.operands.framework = framework_of(tensors_and_pattern[0]);
    for (const Operand& operand : call.operands.operands) call.operands.inputs.emplace_back(operand.view);
    return call;
}

Call pack_call(nb::handle tensors, std::string pattern) {
    return Call{
        einc::Op::pack, std::move(pattern), einc::Reduction::none, {}, {}, operands_of(tensors, "pack")};
}

Call unpack_call(nb::handle tensor, nb::handle packed_shapes, std::string pattern) {
    return Call{einc::Op::unpack,         std::move(pattern),           einc::Reduction::none, {},
                shapes_of(packed_shapes), operands_of(tensor, "unpack")};
}

nb::object single_result(const Call& call) {
    return to_python(call.run().front(), call.operands);
}

nb::tuple shape_tuple(const einc::Shape& shape) {
    nb::list dims;
    for (const std::int64_t length : shape) dims.append(length);
    return nb::tuple(dims);
}

// The Call explain(op, ...) describes: the arguments after `op` are that op's own.
Call call_of(const std::string& op, const nb::args& args, const nb::kwargs& axes_lengths) {
    const auto argument = [&](std::size_t i) {
        if (i >= args.size())
            throw nb::type_error(fmt::format("explain('{}', ...): too few arguments", op).c_str());
        return args[i];
    };
    if (op == "rearrange")
        return rearrange_call(argument(0), nb::cast<std::string>(argument(1)), axes_lengths);
    if (op == "repeat") return repeat_call(argument(0), nb::cast<std::string>(argument(1)), axes_lengths);
    if (op == "reduce")
        return reduce_call(argument(0), nb::cast<std::string>(argument(1)),
                           nb::cast<std::string>(argument(2)), axes_lengths);
    if (op == "einsum") return einsum_call(args);
    if (op == "pack") return pack_call(argument(0), nb::cast<std::string>(argument(1)));
    if (op == "unpack") return unpack_call(argument(0), argument(1), nb::cast<std::string>(argument(2)));
    throw einc::Error(einc::ErrorKind::usage, fmt::format("explain: unknown operation '{}'", op))
        .help("rearrange, reduce, repeat, einsum, pack or unpack");
}

// `x.shape` as einc's Shape: parse_shape and dims read only the shape, of a tensor of any dtype.
einc::TensorView shape_view(nb::handle x) {
    einc::TensorView view;
    for (nb::handle length : x.attr("shape")) view.shape.push_back(nb::cast<std::int64_t>(length));
    view.strides.assign(view.shape.size(), 0);
    return view;
}

nb::dict dict_of(const einc::AxisSizes& sizes) {
    nb::dict result;
    for (const einc::AxisSize& size : sizes) result[size.name.c_str()] = size.size;
    return result;
}

// The gradients of a call's inputs given its outputs' (einc::gradient, bound at each call): the backward
// a torch.autograd.Function would run.
nb::list backward(nb::handle output_gradients, const std::string& op, const nb::args& args,
                  const nb::kwargs& axes_lengths) try {
    const Call call = call_of(op, args, axes_lengths);
    if (call.operands.is_list && call.op != einc::Op::pack)
        throw einc::Error(einc::ErrorKind::unsupported,
                          fmt::format("backward of {} of a list of tensors", op))
            .help("stack the list into one tensor first");
    const Operands gradients = operands_of(output_gradients, "backward");
    const einc::Call forward{call.op, call.pattern, call.reduction, call.sizes, false, call.packed_shapes};
    std::vector<einc::TensorView> inputs, output_views;
    for (const einc::Input& input : call.operands.inputs) inputs.push_back(input.view());
    for (const einc::Input& gradient : gradients.inputs) output_views.push_back(gradient.view());
    std::vector<einc::Tensor> results;
    void* stream = stream_of(gradients);
    {
        nb::gil_scoped_release unlocked;
        results =
            einc::gradient(forward, inputs, output_views).run(call.operands.inputs, gradients.inputs, stream);
    }
    nb::list python_results;
    for (const einc::Tensor& result : results) python_results.append(to_python(result, gradients));
    return python_results;
} catch (const RecordsGradient&) {
    throw einc::Error(einc::ErrorKind::unsupported, "backward of tensors that require grad")
        .help("einc's gradients are not recorded by autograd themselves (no double backward): detach them");
}

// run(), or - where an operand requires grad - the call einc.<op>(*args(), **axes_lengths) recorded by
// torch.autograd (_einc_torch.py). (`args` makes the arguments' tuple only then: nothing on the fast path.)
template <typename Run, typename Args>
nb::object or_recorded(const char* op, Run run, Args args, const nb::kwargs* axes_lengths = nullptr) {
    try {
        return run();
    } catch (const RecordsGradient&) {
        const nb::object record = nb::module_::import_("_einc_torch").attr("record");
        return axes_lengths ? record(op, *args(), **(*axes_lengths)) : record(op, *args());
    }
}

}  // namespace

NB_MODULE(einc, m) {
    m.doc() =
        "einc: einops' rearrange, reduce, repeat, einsum, pack and unpack, compiled and planned by einc";
    nb::exception<einc::Error>(m, "EincError", PyExc_ValueError);

    m.def(
        "rearrange",
        [](nb::handle tensor, const std::string& pattern, nb::kwargs axes_lengths) {
            return or_recorded(
                "rearrange", [&] { return single_result(rearrange_call(tensor, pattern, axes_lengths)); },
                [&] { return nb::make_tuple(tensor, pattern); }, &axes_lengths);
        },
        nb::arg("tensor"), nb::arg("pattern"), nb::arg("axes_lengths"),
        "einops.rearrange: a view of the tensor where the plan is one, else a copy");
    m.def(
        "reduce",
        [](nb::handle tensor, const std::string& pattern, const std::string& reduction,
           nb::kwargs axes_lengths) {
            return or_recorded(
                "reduce",
                [&] { return single_result(reduce_call(tensor, pattern, reduction, axes_lengths)); },
                [&] { return nb::make_tuple(tensor, pattern, reduction); }, &axes_lengths);
        },
        nb::arg("tensor"), nb::arg("pattern"), nb::arg("reduction"), nb::arg("axes_lengths"),
        "einops.reduce with a reduction by name: sum, mean, max, min, prod, any, all");
    m.def(
        "repeat",
        [](nb::handle tensor, const std::string& pattern, nb::kwargs axes_lengths) {
            return or_recorded(
                "repeat", [&] { return single_result(repeat_call(tensor, pattern, axes_lengths)); },
                [&] { return nb::make_tuple(tensor, pattern); }, &axes_lengths);
        },
        nb::arg("tensor"), nb::arg("pattern"), nb::arg("axes_lengths"), "einops.repeat");
    m.def(
        "einsum",
        [](nb::args tensors_and_pattern) {
            return or_recorded(
                "einsum", [&] { return single_result(einsum_call(tensors_and_pattern)); },
                [&] { return tensors_and_pattern; });
        },
        nb::arg("tensors_and_pattern"), "einops.einsum(*tensors, pattern): the pattern last");
    m.def(
        "pack",
        [](nb::handle tensors, const std::string& pattern) {
            const auto run = [&] {
                const Call call = pack_call(tensors, pattern);
                std::optional<einc::Program> program;
                std::vector<einc::Tensor> packed;
                void* stream = stream_of(call.operands);
                {
                    nb::gil_scoped_release unlocked;
                    program = call.program();
                    packed = program->run(call.operands.inputs, stream);
                }
                nb::list shapes;
                for (const einc::Shape& shape : einc::packed_shapes(program->bound()))
                    shapes.append(shape_tuple(shape));
                return nb::object(nb::make_tuple(to_python(packed.front(), call.operands), shapes));
            };
            return or_recorded("pack", run, [&] { return nb::make_tuple(tensors, pattern); });
        },
        nb::arg("tensors"), nb::arg("pattern"), "einops.pack: (packed tensor, packed_shapes)");
    m.def(
        "unpack",
        [](nb::handle tensor, nb::handle packed_shapes, const std::string& pattern) {
            const auto run = [&] {
                const Call call = unpack_call(tensor, packed_shapes, pattern);
                nb::list results;
                for (const einc::Tensor& result : call.run())
                    results.append(to_python(result, call.operands));
                return nb::object(results);
            };
            return or_recorded("unpack", run, [&] { return nb::make_tuple(tensor, packed_shapes, pattern); });
        },
        nb::arg("tensor"), nb::arg("packed_shapes"), nb::arg("pattern"),
        "einops.unpack: a list of views of the tensor");
    m.def(
        "parse_shape",
        [](nb::handle x, const std::string& pattern) {
            return dict_of(einc::parse_shape(shape_view(x), pattern));
        },
        nb::arg("x"), nb::arg("pattern"), "einops.parse_shape: {axis name: length}");
    m.def(
        "explain",
        [](const std::string& op, nb::args args, nb::kwargs axes_lengths) {
            const Call call = call_of(op, args, axes_lengths);
            nb::gil_scoped_release unlocked;
            return call.program().explain();
        },
        nb::arg("op"), nb::arg("args"), nb::arg("axes_lengths"),
        "The plan of a call and its cost, as `einc explain` prints it: explain('einsum', q, k, pattern)");
    m.def(
        "explain_json",
        [](const std::string& op, nb::args args, nb::kwargs axes_lengths) {
            const Call call = call_of(op, args, axes_lengths);
            std::string json;
            {
                nb::gil_scoped_release unlocked;
                const einc::Program program = call.program();
                json = einc::plan_to_json(program.plan(), program.schedule(), program.device_model());
            }
            return nb::module_::import_("json").attr("loads")(json);
        },
        nb::arg("op"), nb::arg("args"), nb::arg("axes_lengths"),
        "explain's plan as a dict, as `einc explain --json` prints it");

    m.def("backward", &backward, nb::arg("output_gradients"), nb::arg("op"), nb::arg("args"),
          nb::arg("axes_lengths"),
          "The gradients of a call's inputs, given its outputs' (a tensor, or a list for unpack): "
          "backward(dy, 'einsum', x, w, pattern)");

    // jaxtyping's named dimensions, enforced: the first check of a name binds its length.
    nb::class_<einc::dims>(m, "dims", "Shape checks: d.check(x, 'batch seq hidden'); d['hidden']")
        .def(nb::init<>())
        .def(
            "check",
            [](einc::dims& self, nb::handle x, const std::string& pattern) {
                self.check(shape_view(x), pattern);
            },
            nb::arg("x"), nb::arg("pattern"))
        .def("__getitem__", [](const einc::dims& self, const std::string& name) { return self[name]; })
        .def("__contains__",
             [](const einc::dims& self, const std::string& name) { return self.contains(name); })
        .def("sizes", [](const einc::dims& self) { return dict_of(self.sizes()); });
}
