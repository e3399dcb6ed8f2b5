// Walking a loop nest: the index space of a step, shared by N accesses with their own byte strides.
// for_each_run() calls run(pointers, count, inner_strides) once per run along the innermost mode, so
// the kernels write only their innermost loops and let the compiler vectorise them.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "compiler/layout.hpp"

namespace einc::cpu {

template <std::size_t N>
struct Nest {
    Shape extents;
    std::array<Shape, N> strides;  // bytes, per access, per mode
    std::array<std::byte*, N> base{};

    std::size_t rank() const { return extents.size(); }
};

template <std::size_t N>
Nest<N> make_nest(const std::array<const Layout*, N>& layouts, const std::array<std::byte*, N>& bases,
                  const std::array<std::size_t, N>& element_sizes) {
    Nest<N> nest;
    nest.extents = layouts[0]->extents();
    for (std::size_t a = 0; a < N; ++a) {
        nest.base[a] = bases[a];
        for (const Mode& m : layouts[a]->modes)
            nest.strides[a].push_back(m.stride * static_cast<std::int64_t>(element_sizes[a]));
    }
    return nest;
}

// Calls run(pointers, count, inner_strides) for every run of the innermost mode, with mode 0 limited
// to [begin, end) (for splitting the work across threads). A nest of rank 0 is one run of one element,
// of rank 1 one run of [begin, end). run() is called from one place only: it is inlined, kernel and all,
// and three copies of each kernel tripled the build time of the files that use this.
template <std::size_t N, typename Run>
void for_each_run(const Nest<N>& nest, std::int64_t begin, std::int64_t end, Run&& run) {
    const std::size_t rank = nest.rank();
    std::array<std::int64_t, N> inner{};
    std::array<std::byte*, N> p = nest.base;
    if (rank > 0)
        for (std::size_t a = 0; a < N; ++a) {
            inner[a] = nest.strides[a][rank - 1];
            p[a] += begin * nest.strides[a][0];
        }
    const std::int64_t count = rank == 0 ? 1 : rank == 1 ? end - begin : nest.extents[rank - 1];
    if (rank > 1 && (begin >= end || count == 0)) return;
    // An odometer over the outer modes; mode 0 runs over [begin, end).
    Shape index(rank > 1 ? rank - 1 : 0, 0);
    if (rank > 1) index[0] = begin;
    for (;;) {
        run(p, count, inner);
        if (rank <= 1) return;
        std::size_t d = rank - 1;
        for (;;) {
            --d;
            ++index[d];
            for (std::size_t a = 0; a < N; ++a) p[a] += nest.strides[a][d];
            const std::int64_t limit = d == 0 ? end : nest.extents[d];
            if (index[d] < limit) break;
            if (d == 0) return;
            for (std::size_t a = 0; a < N; ++a) p[a] -= index[d] * nest.strides[a][d];
            index[d] = 0;
        }
    }
}

}  // namespace einc::cpu
