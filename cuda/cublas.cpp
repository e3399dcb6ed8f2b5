#include "cuda/cublas.hpp"

#include <fmt/format.h>

#include "cuda/library.hpp"
#include "einc_toolkit_paths.hpp"
#include "grammar/diagnostic.hpp"

namespace einc::cuda {

const Cublas& cublas() {
    struct Loaded {
        SharedLibrary library;
        Cublas functions;
        bool complete = false;
    };
    static const Loaded loaded = [] {
        Loaded l;
        l.library = open_library("EINC_CUBLAS", {"libcublas.so.13", "libcublas.so.12", "libcublas.so"},
                                 toolkit::cublas_directory);
        Cublas& f = l.functions;
        l.complete = l.library.handle && find_function(l.library, "cublasCreate_v2", f.create) &&
                     find_function(l.library, "cublasSetStream_v2", f.set_stream) &&
                     find_function(l.library, "cublasSetWorkspace_v2", f.set_workspace) &&
                     find_function(l.library, "cublasGemmStridedBatchedEx_64", f.gemm_strided_batched) &&
                     find_function(l.library, "cublasGetStatusString", f.status_string);
        return l;
    }();
    if (!loaded.complete)
        throw Error(ErrorKind::device, loaded.library.handle
                                           ? "the cuBLAS found is too old: einc needs cuBLAS 12 or newer"
                                           : "cuBLAS is not available: einc cannot run GEMMs on the GPU")
            .note(fmt::format("tried: {}", loaded.library.tried))
            .help("install the CUDA toolkit's cuBLAS (or set EINC_CUBLAS to libcublas.so)");
    return loaded.functions;
}

}  // namespace einc::cuda
