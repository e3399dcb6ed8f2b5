#include "compiler/canonicalize.hpp"

#include <algorithm>

#include "grammar/diagnostic.hpp"

namespace einc {

void canonicalize(std::span<Layout> accesses) {
    EINC_ASSERT(!accesses.empty());
    const std::size_t rank = accesses[0].rank();
    for (const Layout& layout : accesses) EINC_ASSERT(layout.rank() == rank);

    if (accesses[0].size() == 0) {
        const auto empty_and_written = [](const Mode& m) { return m.extent == 0 && m.stride != 0; };
        if (std::any_of(accesses[0].modes.begin(), accesses[0].modes.end(), empty_and_written)) {
            // Nothing is read and nothing written: one empty mode, which the destination steps along.
            accesses[0] = Layout{{Mode{0, 1}}};
            for (Layout& layout : accesses.subspan(1)) layout = Layout{{Mode{0, 0}}};
            return;
        }
        // An empty reduction still writes every destination element (the reduction's identity): keep
        // the modes the destination steps along, then one empty mode it reduces. (The other reduced
        // modes read nothing either; kept, their extents could overflow when merged: 4 x 2^63-1 x 0.)
        std::vector<std::size_t> nonempty;
        for (std::size_t k = 0; k < rank; ++k)
            if (accesses[0].modes[k].extent != 0 && accesses[0].modes[k].stride != 0) nonempty.push_back(k);
        for (Layout& layout : accesses) layout = permute(layout, nonempty);
        canonicalize(accesses);
        for (Layout& layout : accesses) layout.modes.push_back(Mode{0, 0});
        return;
    }
    // Order the modes, outermost first; extent-1 modes are dropped.
    std::vector<std::size_t> order;
    for (const std::size_t k : order_by_stride(accesses))
        if (accesses[0].modes[k].extent != 1) order.push_back(k);
    // Merge neighbours that walk memory as one mode in every access.
    std::vector<SmallVector<Mode, 8>> merged(accesses.size());
    for (const std::size_t k : order) {
        const bool merge_all =
            !merged[0].empty() && std::all_of(accesses.begin(), accesses.end(), [&](const Layout& l) {
                const std::size_t a = static_cast<std::size_t>(&l - accesses.data());
                return mergeable(merged[a].back(), l.modes[k]);
            });
        for (std::size_t a = 0; a < accesses.size(); ++a) {
            const Mode mode = accesses[a].modes[k];
            if (merge_all)
                merged[a].back() = Mode{merged[a].back().extent * mode.extent, mode.stride};
            else
                merged[a].push_back(mode);
        }
    }
    for (std::size_t a = 0; a < accesses.size(); ++a) accesses[a].modes = std::move(merged[a]);
}

}  // namespace einc
