#include "runtime/kernel_registry.hpp"

#include <algorithm>
#include <mutex>

namespace einc {
namespace {

struct Registry {
    std::mutex mutex;
    std::vector<AheadOfTimeKernel> kernels;
};

// Constructed on first use: generated sources register from their static initialisers, in any order.
Registry& registry() {
    static Registry instance;
    return instance;
}

}  // namespace

void register_ahead_of_time(AheadOfTimeKernel kernel) {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    const auto same = [&](const AheadOfTimeKernel& k) {
        return k.name == kernel.name && k.arch == kernel.arch && k.format == kernel.format;
    };
    if (const auto it = std::find_if(r.kernels.begin(), r.kernels.end(), same); it != r.kernels.end())
        *it = std::move(kernel);
    else
        r.kernels.push_back(std::move(kernel));
}

std::optional<AheadOfTimeKernel> find_ahead_of_time(std::string_view kernel_name, int device_arch) {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    const AheadOfTimeKernel* best = nullptr;
    const auto rank = [&](const AheadOfTimeKernel& k) {  // higher is better; 0: does not run on this device
        if (k.format == BinaryFormat::cubin)
            return k.arch / 10 == device_arch / 10 && k.arch <= device_arch ? 1000 + k.arch : 0;
        return k.arch <= device_arch ? k.arch : 0;
    };
    for (const AheadOfTimeKernel& k : r.kernels)
        if (k.name == kernel_name && rank(k) > 0 && (!best || rank(k) > rank(*best))) best = &k;
    if (!best) return std::nullopt;
    return *best;
}

std::vector<AheadOfTimeKernel> ahead_of_time_kernels() {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    return r.kernels;
}

std::vector<KernelSignature> missing_ahead_of_time(const Schedule& schedule, int arch) {
    std::vector<KernelSignature> missing;
    for (const KernelSignature& k : kernels_of(schedule))
        if (!find_ahead_of_time(k.name(), arch)) missing.push_back(k);
    return missing;
}

}  // namespace einc
