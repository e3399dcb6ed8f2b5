// A bounded, thread-safe LRU cache of programs, keyed by everything a plan depends on: the operation,
// the pattern, the reduction, the axis sizes given, the options that shape the plan (contiguous,
// require_view, alpha and beta), and each input's dtype, shape, strides and device.
// It is what makes the one-line calls (einc::rearrange & co.) cost a hash and a lookup when they repeat.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string_view>

#include "program.hpp"

namespace einc {

// A call described by references, so that looking it up allocates nothing.
struct CallRef {
    Op op = Op::rearrange;
    std::string_view pattern;
    Reduction reduction = Reduction::none;
    const AxisSizes* sizes = nullptr;
    bool compact = false;
    const std::vector<Shape>* packed_shapes = nullptr;
};

// Programs of longer patterns are planned on every call but never kept: the cache holds at most
// capacity entries, each of a bounded size (a program's size grows with its pattern's).
inline constexpr std::size_t max_cached_pattern_bytes = 4096;

class PlanCache {
public:
    explicit PlanCache(std::size_t capacity = 1024);
    ~PlanCache();
    PlanCache(const PlanCache&) = delete;
    PlanCache& operator=(const PlanCache&) = delete;

    // The program for this call on tensors laid out like `inputs` (and, where given, writing outputs laid
    // out like `outputs`: Expression::bind(inputs, outputs)): found, or parsed, bound and planned (outside
    // the lock) and kept, evicting the least recently used beyond the capacity.
    Program get(const CallRef& call, std::span<const Input> inputs, const Options& options,
                std::span<const TensorView> outputs = {});

    struct Stats {
        std::uint64_t hits = 0, misses = 0, evictions = 0;
        std::size_t size = 0, capacity = 0;
    };
    Stats stats() const;
    void set_capacity(std::size_t capacity);  // 0 disables caching
    void clear();

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// The cache the one-line calls use (capacity 1024; EINC_PLAN_CACHE_SIZE overrides at start-up).
PlanCache& default_plan_cache();

}  // namespace einc
