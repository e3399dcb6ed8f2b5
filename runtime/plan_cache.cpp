#include "runtime/plan_cache.hpp"

#include <bit>
#include <cstdlib>
#include <functional>
#include <list>
#include <unordered_map>

namespace einc {
namespace {

// What an entry was planned for (strides normalised as spec_of() does).
struct Key {
    Call call;
    std::vector<TensorSpec> inputs;
    std::vector<TensorSpec> outputs;  // the caller's, where the program was bound to them
    Device device = Device::cpu;
    int device_index = 0;
    bool contiguous = false;
    bool require_view = false;
    double alpha = 1, beta = 0;              // the epilogue is part of the plan
    bool allow_tf32 = false;                 // and the compute type of its GEMMs
    std::size_t max_intermediate_bytes = 0;  // and its contraction order
};

inline std::uint64_t mix(std::uint64_t h, std::uint64_t v) {
    v *= 0x9E3779B97F4A7C15ull;
    v ^= v >> 29;
    return (h ^ v) * 0xBF58476D1CE4E5B9ull;
}

void hash_layout(std::uint64_t& h, const TensorView& v) {
    h = mix(h, static_cast<std::uint64_t>(v.dtype) | static_cast<std::uint64_t>(v.device) << 8 |
                   static_cast<std::uint64_t>(v.device_index) << 16 |
                   static_cast<std::uint64_t>(v.rank()) << 32);
    const bool empty = v.numel() == 0;
    for (std::size_t d = 0; d < v.rank(); ++d)
        h = mix(mix(h, static_cast<std::uint64_t>(v.shape[d])),
                static_cast<std::uint64_t>(planned_stride(v, d, empty)));
}

std::uint64_t hash_of(const CallRef& call, std::span<const Input> inputs, const Options& options,
                      std::span<const TensorView> outputs) {
    std::uint64_t h = std::hash<std::string_view>{}(call.pattern);
    h = mix(h, static_cast<std::uint64_t>(call.op) | static_cast<std::uint64_t>(call.reduction) << 8 |
                   static_cast<std::uint64_t>(call.compact) << 16 |
                   static_cast<std::uint64_t>(options.contiguous) << 17 |
                   static_cast<std::uint64_t>(options.require_view) << 18);
    if (options.max_intermediate_bytes != 0) h = mix(h, options.max_intermediate_bytes);
    if (options.alpha != 1 || options.beta != 0)
        h = mix(mix(h, std::bit_cast<std::uint64_t>(options.alpha)),
                std::bit_cast<std::uint64_t>(options.beta));
    if (call.sizes)
        for (const AxisSize& s : *call.sizes)
            h = mix(mix(h, std::hash<std::string_view>{}(s.name)), static_cast<std::uint64_t>(s.size));
    if (call.packed_shapes)
        for (const Shape& shape : *call.packed_shapes) {
            h = mix(h, shape.size());
            for (const std::int64_t e : shape) h = mix(h, static_cast<std::uint64_t>(e));
        }
    for (const Input& input : inputs) hash_layout(h, input.view());
    h = mix(h, outputs.size());
    for (const TensorView& output : outputs) hash_layout(h, output);
    return h;
}

bool matches(const Key& key, const CallRef& call, std::span<const Input> inputs, const Options& options,
             std::span<const TensorView> outputs) {
    static const AxisSizes no_sizes;
    static const std::vector<Shape> no_shapes;
    if (key.call.op != call.op || key.call.reduction != call.reduction || key.call.compact != call.compact ||
        key.call.pattern != call.pattern || key.contiguous != options.contiguous ||
        key.require_view != options.require_view || key.alpha != options.alpha || key.beta != options.beta ||
        key.allow_tf32 != options.allow_tf32 ||
        key.max_intermediate_bytes != options.max_intermediate_bytes ||
        key.call.sizes != (call.sizes ? *call.sizes : no_sizes) ||
        key.call.packed_shapes != (call.packed_shapes ? *call.packed_shapes : no_shapes) ||
        key.inputs.size() != inputs.size() || key.outputs.size() != outputs.size())
        return false;
    for (std::size_t k = 0; k < outputs.size(); ++k)
        if (!has_layout(outputs[k], key.outputs[k])) return false;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        const TensorView& v = inputs[i].view();
        if (v.device != key.device || v.device_index != key.device_index || !has_layout(v, key.inputs[i]))
            return false;
    }
    return true;
}

struct Entry {
    std::uint64_t hash;
    Key key;
    Program program;
};

}  // namespace

struct PlanCache::Impl {
    mutable std::mutex mutex;
    std::list<Entry> entries;  // most recently used first
    std::unordered_multimap<std::uint64_t, std::list<Entry>::iterator> index;
    std::size_t capacity;
    Stats stats;

    void evict_beyond_capacity() {
        while (entries.size() > capacity) {
            const auto last = std::prev(entries.end());
            const auto [begin, end] = index.equal_range(last->hash);
            for (auto it = begin; it != end; ++it)
                if (it->second == last) {
                    index.erase(it);
                    break;
                }
            entries.erase(last);
            ++stats.evictions;
        }
    }
};

PlanCache::PlanCache(std::size_t capacity) : impl_(std::make_unique<Impl>()) {
    impl_->capacity = capacity;
}
PlanCache::~PlanCache() = default;

Program PlanCache::get(const CallRef& call, std::span<const Input> inputs, const Options& options,
                       std::span<const TensorView> outputs) {
    const std::uint64_t hash = hash_of(call, inputs, options, outputs);
    {
        std::lock_guard lock(impl_->mutex);
        const auto [begin, end] = impl_->index.equal_range(hash);
        for (auto it = begin; it != end; ++it)
            if (matches(it->second->key, call, inputs, options, outputs)) {
                impl_->entries.splice(impl_->entries.begin(), impl_->entries, it->second);
                ++impl_->stats.hits;
                return it->second->program;
            }
        ++impl_->stats.misses;
    }
    // A miss: parse, bind and plan without holding the lock (other calls go on meanwhile).
    Call owned{call.op,        std::string(call.pattern),
               call.reduction, call.sizes ? *call.sizes : AxisSizes{},
               call.compact,   call.packed_shapes ? *call.packed_shapes : std::vector<Shape>{}};
    std::vector<TensorView> views;
    for (const Input& input : inputs) views.push_back(input.view());
    Program program = outputs.empty() ? Expression(owned).bind(views, options)
                                      : Expression(owned).bind(views, outputs, options);

    Key key{std::move(owned),
            {},
            {},
            Device::cpu,
            0,
            options.contiguous,
            options.require_view,
            options.alpha,
            options.beta,
            options.allow_tf32,
            options.max_intermediate_bytes};
    for (const TensorView& v : views) key.inputs.push_back(spec_of(v));
    for (const TensorView& v : outputs) key.outputs.push_back(spec_of(v));
    if (!views.empty()) {
        key.device = views[0].device;
        key.device_index = views[0].device_index;
    }
    std::lock_guard lock(impl_->mutex);
    if (impl_->capacity == 0 || call.pattern.size() > max_cached_pattern_bytes) return program;
    const auto [begin, end] = impl_->index.equal_range(hash);
    for (auto it = begin; it != end; ++it)
        if (matches(it->second->key, call, inputs, options, outputs))
            return it->second->program;  // planned meanwhile
    impl_->entries.push_front(Entry{hash, std::move(key), program});
    impl_->index.emplace(hash, impl_->entries.begin());
    impl_->evict_beyond_capacity();
    return program;
}

PlanCache::Stats PlanCache::stats() const {
    std::lock_guard lock(impl_->mutex);
    Stats s = impl_->stats;
    s.size = impl_->entries.size();
    s.capacity = impl_->capacity;
    return s;
}

void PlanCache::set_capacity(std::size_t capacity) {
    std::lock_guard lock(impl_->mutex);
    impl_->capacity = capacity;
    impl_->evict_beyond_capacity();
}

void PlanCache::clear() {
    std::lock_guard lock(impl_->mutex);
    impl_->entries.clear();
    impl_->index.clear();
}

PlanCache& default_plan_cache() {
    static PlanCache cache([] {
        if (const char* value = std::getenv("EINC_PLAN_CACHE_SIZE"))
            return static_cast<std::size_t>(std::strtoull(value, nullptr, 10));
        return std::size_t{1024};
    }());
    return cache;
}

}  // namespace einc
