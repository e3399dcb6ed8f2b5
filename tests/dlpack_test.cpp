// DLPack: tensors of other libraries in and out of einc without copies.
#include <doctest/doctest.h>

#include "einc/einc.hpp"
#include "runtime/dlpack.hpp"
#include "tests/reference/reference.hpp"

using namespace einc;

TEST_CASE("dlpack: a strided tensor comes in as a view, and einc computes on it") {
    std::vector<float> data{0, 1, 2, 3, 4, 5};
    std::int64_t shape[] = {3, 2};
    std::int64_t strides[] = {1, 3};  // the transpose of a row-major 2x3
    DLTensor t{data.data(), {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, strides, 0};
    const TensorView view = from_dlpack(t);
    CHECK(view.data == data.data());
    CHECK(view.strides == Shape{1, 3});
    CHECK(reference::values_of(view) == std::vector<double>{0, 3, 1, 4, 2, 5});
    CHECK(reference::values_of(reduce(view, "a b -> a", einc::sum).view()) == std::vector<double>{3, 5, 7});
}

TEST_CASE("dlpack: null strides mean row-major; byte_offset is honoured") {
    std::vector<std::int32_t> data{9, 1, 2, 3, 4};
    std::int64_t shape[] = {2, 2};
    DLTensor t{data.data(), {kDLCPU, 0}, 2, {kDLInt, 32, 1}, shape, nullptr, sizeof(std::int32_t)};
    const TensorView view = from_dlpack(t);
    CHECK(view.dtype == DType::i32);
    CHECK(reference::values_of(view) == std::vector<double>{1, 2, 3, 4});
}

TEST_CASE("dlpack: export shares memory and keeps it alive until the consumer's deleter") {
    DLManagedTensor* managed = nullptr;
    void* data = nullptr;
    {
        const Tensor x = reference::make_tensor(DType::bf16, {2, 3}, {1, 2, 3, 4, 5, 6});
        data = x.data();
        managed = to_dlpack(rearrange(x, "a b -> b a"));  // a view of x
    }
    CHECK(managed->dl_tensor.data == data);
    CHECK(managed->dl_tensor.dtype.code == kDLBfloat);
    CHECK(managed->dl_tensor.strides[0] == 1);
    const Tensor back = from_dlpack(managed);  // takes ownership; the deleter runs when `back` goes
    CHECK(reference::values_of(back.view()) == std::vector<double>{1, 4, 2, 5, 3, 6});
}

TEST_CASE("dlpack: what einc does not take is a clear error") {
    std::vector<std::uint8_t> data(4);
    std::int64_t shape[] = {4};
    DLTensor quadruple{data.data(), {kDLCPU, 0}, 1, {kDLFloat, 128, 1}, shape, nullptr, 0};
    CHECK_THROWS_WITH_AS(from_dlpack(quadruple), doctest::Contains("code 2, 128 bits"), Error);
    DLTensor unsigned_bytes{data.data(), {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, shape, nullptr, 0};
    CHECK(from_dlpack(unsigned_bytes).dtype == DType::u8);  // (uint 8-64 and int 16 are einc's too)
    DLTensor vector_lanes{data.data(), {kDLCPU, 0}, 1, {kDLFloat, 32, 4}, shape, nullptr, 0};
    CHECK_THROWS_WITH_AS(from_dlpack(vector_lanes), doctest::Contains("4 lanes"), Error);
    DLTensor opencl{data.data(), {kDLOpenCL, 0}, 1, {kDLFloat, 32, 1}, shape, nullptr, 0};
    CHECK_THROWS_WITH_AS(from_dlpack(opencl), doctest::Contains("device type"), Error);
    CHECK_THROWS_AS(to_dlpack(Tensor::zeros(DType::f8e4m3, {2})), Error);
}
