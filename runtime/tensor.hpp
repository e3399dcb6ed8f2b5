// Tensors as einc sees them: a pointer, a dtype, and a layout - shape and strides in elements, in the
// spirit of CuTe's shape:stride. TensorView wraps any memory without owning it; Tensor owns what einc
// allocates for results and hands out views of it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "../compiler/call.hpp"
#include "../compiler/dtype.hpp"
#include "../compiler/layout.hpp"

namespace einc {

enum class Device : std::uint8_t { cpu, cuda };
std::string_view name_of(Device device);

// A non-owning view: element (i0, i1, ...) is at data + sum(ik * strides[k]) * size_of(dtype).
// Strides may be 0 (broadcast) or negative; a view never implies its memory is dense.
struct TensorView {
    void* data = nullptr;
    DType dtype = DType::f32;
    Shape shape;
    Shape strides;  // in elements, one per dim
    Device device = Device::cpu;
    int device_index = 0;

    std::size_t rank() const { return shape.size(); }
    std::int64_t numel() const;  // INT64_MAX when the product of the extents does not fit
    bool is_row_major() const;   // dense, C order (unit dims and empty tensors count as dense)

    template <typename T>
    T* data_as() const {
        return static_cast<T*>(data);
    }
};

// "f32 (2,3):(3,1) on cpu"
std::string describe(const TensorView& view);

// An owning tensor: row-major storage allocated by einc (64-byte aligned on the CPU; from 4 MiB, 2 MiB
// aligned and advised onto transparent huge pages, as numpy's arrays are).
class Tensor {
public:
    Tensor() = default;
    // A tensor over existing memory; `storage` keeps that memory alive (may be null: the caller does).
    Tensor(TensorView view, std::shared_ptr<void> storage)
        : storage_(std::move(storage)), view_(std::move(view)) {}
    // Row-major; on a GPU (Device::cuda) when the CUDA backend is linked in. Throws einc::Error when the
    // size overflows, a length is negative or the memory is not there.
    static Tensor empty(DType dtype, Shape shape, Device device = Device::cpu,
                        int device_index = 0);  // uninitialised
    static Tensor zeros(DType dtype, Shape shape, Device device = Device::cpu, int device_index = 0);

    const TensorView& view() const { return view_; }
    operator const TensorView&() const { return view_; }  // NOLINT: a tensor is usable wherever a view is
    void* data() const { return view_.data; }
    DType dtype() const { return view_.dtype; }
    const Shape& shape() const { return view_.shape; }
    std::int64_t numel() const { return view_.numel(); }
    std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * size_of(view_.dtype); }

    template <typename T>
    T* data_as() const {
        return view_.data_as<T>();
    }

    // Keeps the storage alive, e.g. for a view of this tensor returned to a user.
    const std::shared_ptr<void>& storage() const { return storage_; }

private:
    std::shared_ptr<void> storage_;
    TensorView view_;
};

}  // namespace einc
