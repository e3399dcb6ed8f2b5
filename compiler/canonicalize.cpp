#include "compiler/canonicalize.hpp"

#include <algorithm>
#include <cstdlib>
#include <numeric>

#include "grammar/diagnostic.hpp"

namespace einc {

void canonicalize(std::span<Layout> accesses) {
    EINC_ASSERT(!accesses.empty());
    const std::size_t rank = accesses[0].rank();
    for (const Layout& layout : accesses) EINC_ASSERT(layout.rank() == rank);

    if (accesses[0].size() == 0) {
        for (Layout& layout : accesses) layout = Layout{{Mode{0, 0}}};
        return;
    }
    // Order the modes, outermost first.
    std::vector<std::size_t> order;
    for (std::size_t k = 0; k < rank; ++k)
        if (accesses[0].modes[k].extent != 1) order.push_back(k);
    const auto key = [&](std::size_t access, std::size_t mode) {
        return std::llabs(accesses[access].modes[mode].stride);
    };
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        for (std::size_t access = 0; access < accesses.size(); ++access)
            if (key(access, a) != key(access, b)) return key(access, a) > key(access, b);
        return false;
    });
    // Merge neighbours that walk memory as one mode in every access.
    std::vector<std::vector<Mode>> merged(accesses.size());
    for (const std::size_t k : order) {
        const bool merge_all = !merged[0].empty() && std::all_of(accesses.begin(), accesses.end(), [&](const Layout& l) {
            const std::size_t a = static_cast<std::size_t>(&l - accesses.data());
            return mergeable(merged[a].back(), l.modes[k]);
        });
        for (std::size_t a = 0; a < accesses.size(); ++a) {
            const Mode mode = accesses[a].modes[k];
            if (merge_all) merged[a].back() = Mode{merged[a].back().extent * mode.extent, mode.stride};
            else merged[a].push_back(mode);
        }
    }
    for (std::size_t a = 0; a < accesses.size(); ++a) accesses[a].modes = std::move(merged[a]);
}

}  // namespace einc
