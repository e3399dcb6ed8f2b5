// The CUDA implementation of einc's GPU backend: device memory, plan preparation (kernels compiled or
// found in the caches, and loaded, when a program is bound), and execution on the caller's stream with no
// hidden synchronisation. Registered when the program starts.
#include "runtime/backend.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <fmt/format.h>
#include <map>
#include <mutex>
#include <unordered_map>

#include "cuda/cublas.hpp"
#include "cuda/cuda.hpp"
#include "cuda/driver.hpp"
#include "cuda/gemm.hpp"
#include "cuda/kernel_cache.hpp"
#include "grammar/diagnostic.hpp"
#include "runtime/api.hpp"
#include "runtime/gpu_executor.hpp"

namespace einc::cuda {
namespace {

// Runs `f` with device `index` current, restoring the caller's device after.
template <typename F>
decltype(auto) on_device(int index, F&& f) {
    int previous = 0;
    check(cudaGetDevice(&previous), "cudaGetDevice");
    if (previous != index) check(cudaSetDevice(index), "cudaSetDevice");
    struct Restore {
        int device, previous;
        ~Restore() {
            if (device != previous) cudaSetDevice(previous);
        }
    } restore{index, previous};
    return f();
}

const DeviceInfo& info_of(int device) {
    static std::mutex mutex;
    static std::map<int, DeviceInfo> infos;
    std::lock_guard lock(mutex);
    auto it = infos.find(device);
    if (it == infos.end()) it = infos.emplace(device, device_info(device)).first;
    return it->second;
}

// (Tensor::empty has checked that the size fits.)
std::size_t dense_bytes(DType dtype, const Shape& shape) {
    return static_cast<std::size_t>(TensorSpec{dtype, shape, {}}.bytes());
}

// Device memory for a tensor, from `malloc` (cudaMalloc or cudaMallocAsync); running out is an einc::Error
// saying how much was asked for and how much is free.
template <typename Malloc>
void* allocate_bytes(DType dtype, const Shape& shape, int device, Malloc malloc) {
    if (!available())
        throw Error(ErrorKind::device, "no CUDA GPU is available")
            .help("run on a machine with an NVIDIA GPU and driver");
    const std::size_t bytes = dense_bytes(dtype, shape);
    void* memory = nullptr;
    if (bytes == 0) return memory;
    on_device(device, [&] {
        const cudaError_t status = malloc(&memory, bytes);
        if (status == cudaErrorMemoryAllocation) {
            cudaGetLastError();
            std::size_t free = 0, total = 0;
            cudaMemGetInfo(&free, &total);
            throw Error(
                ErrorKind::device,
                fmt::format(
                    "GPU {} is out of memory: {} bytes asked for a {} tensor of shape {}, {} free of {}",
                    device, bytes, name_of(dtype), format_shape(shape), free, total))
                .help("free other tensors, or work on smaller pieces");
        }
        check(status, "allocating GPU memory");
    });
    return memory;
}

// The memory of runs given no workspace (their temporaries and scratch) and of the results one-line calls
// allocate on a stream: a stream-ordered pool of einc's own on each device that keeps up to
// scratch_pool_kept_bytes mapped across synchronisations. The device's default pool unmaps what is freed
// at each synchronisation (its release threshold is 0 unless the program sets one), and mapping it again
// cost a one-pass reduction of 268 MB 75 us a call in gpu_bench's batches of 7 against its kernel's 66 us
// (H200, fff4784); a one-line reduce's result, allocated and freed each call, took 1.84 us of host time
// beside its launch (56bc81e). The program's own pools are left as they are. Null where the device has no
// pools of its own: then cudaMallocAsync.
constexpr std::uint64_t scratch_pool_kept_bytes = std::uint64_t{64} << 20;

cudaMemPool_t scratch_pool(int device) {
    static std::mutex mutex;
    static std::map<int, cudaMemPool_t> pools;
    std::lock_guard lock(mutex);
    const auto found = pools.find(device);
    if (found != pools.end()) return found->second;
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = cudaMemHandleTypeNone;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    cudaMemPool_t pool = nullptr;
    if (cudaMemPoolCreate(&pool, &props) != cudaSuccess) {
        cudaGetLastError();
        pool = nullptr;
    } else {
        std::uint64_t kept = scratch_pool_kept_bytes;
        check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &kept),
              "cudaMemPoolSetAttribute (einc scratch pool)");
    }
    return pools.emplace(device, pool).first->second;
}

// A schedule prepared for one device: the loaded function of each of its kernel launches, found once so
// that a run launches with no lookup.
struct CudaPreparedPlan {
    std::unordered_map<const KernelLaunch*, CUfunction> functions;
    cudaMemPool_t scratch_pool = nullptr;  // where a run given no workspace allocates (scratch_pool())
};

// Device operations on one stream: scratch memory in stream order, kernel launches, cuBLAS.
class StreamOps final : public DeviceOps {
public:
    StreamOps(cudaStream_t stream, const CudaPreparedPlan& prepared) : stream_(stream), prepared_(prepared) {}

    void* allocate(std::size_t bytes) override {
        void* memory = nullptr;
        if (prepared_.scratch_pool)
            check(cudaMallocFromPoolAsync(&memory, bytes, prepared_.scratch_pool, stream_),
                  "cudaMallocFromPoolAsync (einc scratch memory)");
        else
            check(cudaMallocAsync(&memory, bytes, stream_), "cudaMallocAsync (einc scratch memory)");
        return memory;
    }
    void release(void* memory) override { cudaFreeAsync(memory, stream_); }
    void zero(void* memory, std::size_t bytes) override {
        check(cudaMemsetAsync(memory, 0, bytes, stream_), "cudaMemsetAsync (einc scratch memory)");
    }

    // No allocation, lookup that could miss, or module load here: what a captured graph may contain.
    void launch(const KernelLaunch& launch, std::span<void* const> pointers) override {
        const auto found = prepared_.functions.find(&launch);
        EINC_ASSERT(found != prepared_.functions.end());  // prepare() loaded every launch, unaligned ones too
        std::array<void*, 1 + 4> arguments{
            const_cast<KernelParams*>(&launch.params)};  // params, then <= 4 pointers
        EINC_ASSERT(pointers.size() < arguments.size());
        for (std::size_t i = 0; i < pointers.size(); ++i) arguments[1 + i] = const_cast<void**>(&pointers[i]);
        check(driver().launch_kernel(found->second, launch.grid.x, launch.grid.y, launch.grid.z,
                                     launch.block.x, launch.block.y, launch.block.z, 0, stream_,
                                     arguments.data(), nullptr),
              "cuLaunchKernel");
    }

    void gemm(const Gemm& g, DType dtype, strategy::GemmCompute compute, const void* a, const void* b,
              void* c, void* workspace, std::size_t workspace_bytes) override {
        cuda::gemm(g, dtype, compute, a, b, c, stream_, workspace, workspace_bytes);
    }

private:
    cudaStream_t stream_;
    const CudaPreparedPlan& prepared_;
};

class CudaBackend final : public GpuBackend {
public:
    Tensor allocate(DType dtype, const Shape& shape, int device) override {
        void* memory = allocate_bytes(dtype, shape, device,
                                      [](void** p, std::size_t bytes) { return cudaMalloc(p, bytes); });
        std::shared_ptr<void> storage(memory, [device](void* p) {
            if (p) on_device(device, [p] { cudaFree(p); });
        });
        return Tensor(TensorView{memory, dtype, shape, row_major_strides(shape), Device::cuda, device},
                      std::move(storage));
    }

    Tensor allocate_on_stream(DType dtype, const Shape& shape, int device, void* stream) override {
        const auto s = static_cast<cudaStream_t>(stream);
        void* memory = allocate_bytes(dtype, shape, device, [s, device](void** p, std::size_t bytes) {
            const cudaMemPool_t pool = scratch_pool(device);
            return pool ? cudaMallocFromPoolAsync(p, bytes, pool, s) : cudaMallocAsync(p, bytes, s);
        });
        std::shared_ptr<void> storage(memory, [device, s](void* p) {
            if (p) on_device(device, [p, s] { cudaFreeAsync(p, s); });
        });
        return Tensor(TensorView{memory, dtype, shape, row_major_strides(shape), Device::cuda, device},
                      std::move(storage));
    }

    void fill_zero(const TensorView& dense) override {
        const std::size_t bytes = dense_bytes(dense.dtype, dense.shape);
        if (bytes > 0)
            on_device(dense.device_index, [&] { check(cudaMemset(dense.data, 0, bytes), "cudaMemset"); });
    }

    Target target(int device) override { return Target::gpu(info_of(device).multiprocessors); }
    std::string describe_device(int device) override { return einc::cuda::describe_device(device); }

    std::shared_ptr<const void> prepare(const Schedule& schedule, int device) override {
        if (!available())
            throw Error(ErrorKind::device, "no CUDA GPU is available")
                .help("run on a machine with an NVIDIA GPU and driver");
        const DeviceInfo& info = info_of(device);
        auto prepared = std::make_shared<CudaPreparedPlan>();
        // Open cuBLAS if a GEMM needs it, and compile (or find) and load every kernel the schedule may
        // launch, now: a failure shows when binding, not in a hot loop.
        const bool gemm =
            std::any_of(schedule.steps.begin(), schedule.steps.end(), [](const ScheduledStep& step) {
                return std::holds_alternative<strategy::LibraryGemm>(step.strategy);
            });
        if (gemm) (void)cublas();
        on_device(device, [&] {
            prepared->scratch_pool = scratch_pool(device);
            if (gemm) open_gemm(device);  // the handle, now: creating it during a run could not be captured
            for (const ScheduledStep& step : schedule.steps)
                if (const auto* kernels = std::get_if<strategy::Kernels>(&step.strategy))
                    for (const auto* launches : {&kernels->launches, &kernels->unaligned_launches})
                        for (const KernelLaunch& launch : *launches)
                            prepared->functions.emplace(&launch,
                                                        kernel_function(launch.signature, device, info.arch));
        });
        return prepared;
    }

    void execute(const Plan& plan, const Schedule& schedule, const void* prepared,
                 std::span<const TensorView> inputs, std::span<TensorView> outputs, void* stream,
                 void* workspace) override {
        const int device = !inputs.empty()    ? inputs[0].device_index
                           : !outputs.empty() ? outputs[0].device_index
                                              : 0;
        for (const TensorView& output : outputs)
            if (output.data && (output.device != Device::cuda || output.device_index != device))
                throw Error(ErrorKind::usage, "outputs must be on the GPU of the inputs");
        on_device(device, [&] {
            StreamOps ops(static_cast<cudaStream_t>(stream), *static_cast<const CudaPreparedPlan*>(prepared));
            run_gpu_plan(plan, schedule, inputs, outputs, ops, static_cast<std::byte*>(workspace));
            check(cudaGetLastError(), "a kernel launch");
        });
    }
};

CudaBackend backend;

// Registers the backend when the program starts (einc links this library whole).
const bool registered = [] {
    register_gpu_backend(&backend);
    return true;
}();

}  // namespace

bool available() {
    return device_available();
}

Tensor to_device(const TensorView& host, int device) {
    if (host.device != Device::cpu)
        throw Error(ErrorKind::usage, "to_device: the tensor is already on a GPU");
    const Tensor dense = host.is_row_major()
                             ? Tensor(host, nullptr)
                             : rearrange(host, "... -> ...", {}, einc::Options{.contiguous = true});
    Tensor result = backend.allocate(host.dtype, host.shape, device);
    on_device(device, [&] {
        check(cudaMemcpy(result.data(), dense.data(), dense.nbytes(), cudaMemcpyHostToDevice),
              "cudaMemcpy to the GPU");
    });
    return result;
}

Tensor to_host(const TensorView& on_device_view) {
    if (on_device_view.device != Device::cuda)
        throw Error(ErrorKind::usage, "to_host: the tensor is not on a GPU");
    const Tensor dense = on_device_view.is_row_major()
                             ? Tensor(on_device_view, nullptr)
                             : rearrange(on_device_view, "... -> ...", {}, einc::Options{.contiguous = true});
    Tensor result = Tensor::empty(on_device_view.dtype, on_device_view.shape);
    on_device(on_device_view.device_index, [&] {
        check(cudaMemcpy(result.data(), dense.data(), result.nbytes(), cudaMemcpyDeviceToHost),
              "cudaMemcpy from the GPU");
    });
    return result;
}

void synchronize(int device) {
    on_device(device, [] { check(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); });
}

std::string describe_device(int device) {
    const DeviceInfo& info = info_of(device);
    return fmt::format("{} (sm_{}, {} SMs, {:.0f} GiB, driver {})", info.name, info.arch,
                       info.multiprocessors, static_cast<double>(info.memory) / (1u << 30), info.driver);
}

}  // namespace einc::cuda
