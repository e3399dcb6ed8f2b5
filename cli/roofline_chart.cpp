#include "cli/roofline_chart.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <numbers>
#include <optional>

namespace einc::cli {
namespace {

// Page geometry, in SVG pixels. The legend and the caption go below the plot, one row each.
constexpr double page_width = 960;
constexpr double plot_left = 96, plot_right = 920, plot_top = 78, plot_bottom = 518;
constexpr double legend_left = 40, row_height = 20;
constexpr double font_size = 12;

// Tableau 10 with its three lightest colours darkened, so that labels in them read on white.
constexpr std::array<const char*, 10> palette{"#4e79a7", "#f28e2b", "#e15759", "#4f9a94", "#59a14f",
                                              "#b6992d", "#b07aa1", "#d37295", "#9c755f", "#79706e"};
const char* colour_of(std::size_t call) {
    return palette[call % palette.size()];
}

std::string escaped(std::string_view text) {
    std::string out;
    for (const char c : text) {
        switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&quot;"; break;
        default: out += c;
        }
    }
    return out;
}

// Characters, counting a UTF-8 sequence as one.
std::size_t text_length(std::string_view text) {
    return static_cast<std::size_t>(
        std::count_if(text.begin(), text.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

// A conservative width for sans-serif text: labels are placed so that even a wide font does not overlap.
double text_width(std::string_view text, double size = font_size) {
    return 0.62 * size * static_cast<double>(text_length(text));
}

std::string shortened(const std::string& text, std::size_t max_chars) {
    if (text_length(text) <= max_chars) return text;
    std::string out;
    std::size_t chars = 0;
    for (const char c : text) {
        if ((c & 0xC0) != 0x80 && ++chars > max_chars - 1) break;
        out += c;
    }
    return out + "…";
}

// 1e12 -> "1 T": tick labels at whole decades.
std::string decade_label(double value, bool si) {
    const int exponent = static_cast<int>(std::lround(std::log10(value)));
    if (!si) {
        if (exponent < 0) return fmt::format("{}", std::pow(10.0, exponent));
        static constexpr std::array<const char*, 3> suffix{"", "k", "M"};
        const int group = std::min(exponent / 3, 2);
        return fmt::format("{}{}", static_cast<long long>(std::lround(std::pow(10.0, exponent - 3 * group))),
                           suffix[static_cast<std::size_t>(group)]);
    }
    static constexpr std::array<const char*, 7> prefix{"", "k", "M", "G", "T", "P", "E"};
    if (exponent < 0 || exponent >= 21) return fmt::format("{:g}", value);
    return fmt::format("{} {}", static_cast<long long>(std::lround(std::pow(10.0, exponent % 3))),
                       prefix[static_cast<std::size_t>(exponent / 3)]);
}

std::string rate(double flops_per_second) {
    return format_flops(flops_per_second) + "/s";
}

struct Box {
    double x0, y0, x1, y1;
    bool overlaps(const Box& o) const { return x0 < o.x1 && o.x0 < x1 && y0 < o.y1 && o.y0 < y1; }
    bool inside(const Box& o) const { return x0 >= o.x0 && x1 <= o.x1 && y0 >= o.y0 && y1 <= o.y1; }
};

// Where labels may not go: points, roof lines, their labels, and labels already placed.
class Occupancy {
public:
    void add(Box box) { boxes_.push_back(box); }
    // The segment from (x0, y0) to (x1, y1), as small boxes along it.
    void add_segment(double x0, double y0, double x1, double y1, double half_width) {
        const double length = std::hypot(x1 - x0, y1 - y0);
        const int pieces = std::max(1, static_cast<int>(length / 6));
        for (int i = 0; i < pieces; ++i) {
            const double t0 = static_cast<double>(i) / pieces, t1 = static_cast<double>(i + 1) / pieces;
            const double ax = x0 + (x1 - x0) * t0, ay = y0 + (y1 - y0) * t0, bx = x0 + (x1 - x0) * t1,
                         by = y0 + (y1 - y0) * t1;
            add({std::min(ax, bx) - half_width, std::min(ay, by) - half_width, std::max(ax, bx) + half_width,
                 std::max(ay, by) + half_width});
        }
    }
    bool free(const Box& box) const {
        return std::none_of(boxes_.begin(), boxes_.end(), [&](const Box& b) { return b.overlaps(box); });
    }

private:
    std::vector<Box> boxes_;
};

// A label's place: its box (which nothing else may overlap) and where its text starts.
struct Placement {
    Box box;
    double x, baseline;
    bool far;  // on the outer ring: drawn with a leader line to its point
};

constexpr double label_height = font_size + 3;

Placement placement_at(double x0, double y0, double w, bool far) {
    return {{x0, y0, x0 + w + 4, y0 + label_height}, x0 + 2, y0 + 2 + 0.8 * font_size, far};
}

// The first free place around a point of radius r at (x, y), trying eight directions close to it, then the
// same eight farther out, twice: right first (text reads on from the point), then the diagonals, then left,
// above and below.
std::optional<Placement> place_label(const std::string& text, double x, double y, double r,
                                     const Occupancy& occupied, const Box& area) {
    const double w = text_width(text), h = label_height;
    for (const double c : {r + 4, r + 20, r + 40}) {
        const std::array<std::pair<double, double>, 8> corners{{{x + c, y - h / 2},
                                                                {x + c * 0.7, y - c * 0.8 - h},
                                                                {x + c * 0.7, y + c * 0.8},
                                                                {x - c - w - 4, y - h / 2},
                                                                {x - c * 0.7 - w - 4, y - c * 0.8 - h},
                                                                {x - c * 0.7 - w - 4, y + c * 0.8},
                                                                {x - w / 2 - 2, y - c - h},
                                                                {x - w / 2 - 2, y + c}}};
        for (const auto& [x0, y0] : corners) {
            const Placement at = placement_at(x0, y0, w, c > r + 4);
            if (at.box.inside(area) && occupied.free(at.box)) return at;
        }
    }
    return std::nullopt;
}

// Label text with a white halo, so that it stays readable over grid lines.
std::string text_element(double x, double y, std::string_view anchor, std::string_view attributes,
                         std::string_view text) {
    return fmt::format("<text x=\"{:.2f}\" y=\"{:.2f}\" text-anchor=\"{}\" {}>{}</text>\n", x, y, anchor,
                       attributes, escaped(text));
}

}  // namespace

double ChartAxes::x(double intensity) const {
    const double t = (std::log10(intensity) - std::log10(x_min)) / (std::log10(x_max) - std::log10(x_min));
    return left + t * (right - left);
}

double ChartAxes::y(double flops_per_second) const {
    const double t =
        (std::log10(flops_per_second) - std::log10(y_min)) / (std::log10(y_max) - std::log10(y_min));
    return bottom - t * (bottom - top);
}

std::vector<ComputeRoof> compute_roofs(const DeviceModel& device) {
    const std::array<std::pair<const char*, double>, 7> peaks{{{"f64", device.peak_f64},
                                                               {"f32", device.peak_f32},
                                                               {"tf32", device.peak_tf32},
                                                               {"bf16", device.peak_bf16},
                                                               {"f16", device.peak_f16},
                                                               {"fp8", device.peak_fp8},
                                                               {"int8", device.peak_i8}}};
    std::vector<ComputeRoof> roofs;
    const bool cpu = device.multiprocessors == 0;
    for (const auto& [name, peak] : peaks) {
        if (peak <= 0) continue;  // not supported on this device
        // A CPU has no TF32 (f32 GEMMs are exact) and no fp8 arithmetic, whatever its model's table says.
        if (cpu && (name == std::string_view("tf32") || name == std::string_view("fp8"))) continue;
        const auto same = std::find_if(roofs.begin(), roofs.end(),
                                       [peak = peak](const ComputeRoof& r) { return r.peak == peak; });
        if (same != roofs.end())
            same->dtypes += fmt::format(" · {}", name);
        else
            roofs.push_back(ComputeRoof{name, peak});
    }
    std::sort(roofs.begin(), roofs.end(),
              [](const ComputeRoof& a, const ComputeRoof& b) { return a.peak < b.peak; });
    return roofs;
}

ChartAxes chart_axes(const RooflineChart& chart) {
    const DeviceModel& device = *chart.device;
    double lo_x = std::numeric_limits<double>::infinity(), hi_x = 0;
    double lo_y = std::numeric_limits<double>::infinity(), hi_y = 0;
    for (const ChartPoint& p : chart.points) {
        lo_x = std::min(lo_x, p.intensity), hi_x = std::max(hi_x, p.intensity);
        lo_y = std::min(lo_y, p.flops_per_second), hi_y = std::max(hi_y, p.flops_per_second);
    }
    for (const ComputeRoof& roof : compute_roofs(device)) {
        hi_x = std::max(hi_x, roof.peak / device.bandwidth);  // every ridge is in the picture
        lo_x = std::min(lo_x, roof.peak / device.bandwidth);
        hi_y = std::max(hi_y, roof.peak);
    }
    ChartAxes axes;
    axes.left = plot_left, axes.right = plot_right, axes.top = plot_top, axes.bottom = plot_bottom;
    // Whole decades, with room for labels: points never sit on an edge.
    axes.x_min = std::pow(10.0, std::floor(std::log10(lo_x) - 0.35));
    axes.x_max = std::pow(10.0, std::ceil(std::log10(hi_x) + 0.35));
    axes.y_max = std::pow(10.0, std::ceil(std::log10(hi_y) + 0.3));
    lo_y = std::min(lo_y, device.bandwidth * axes.x_min);  // the memory roof starts at the left edge
    axes.y_min = std::pow(10.0, std::floor(std::log10(lo_y) - 0.2));
    return axes;
}

namespace {

// The SVG of a chart, drawn piece by piece in the order render_svg lists; each piece marks where it drew in
// `occupied`, so that later labels go where they cover nothing.
class Drawing {
public:
    explicit Drawing(const RooflineChart& chart)
        : chart_(chart), device_(*chart.device),
          axes_(chart_axes(chart)), area_{axes_.left, axes_.top, axes_.right, axes_.bottom},
          roofs_(compute_roofs(device_)), bw_(device_.bandwidth) {
        const double top_peak = roofs_.empty() ? 0 : roofs_.back().peak;
        mx0_ = axes_.x(axes_.x_min), my0_ = axes_.y(bw_ * axes_.x_min), mx1_ = axes_.x(top_peak / bw_),
        my1_ = axes_.y(top_peak);
        key_top_ = axes_.bottom + 72, legend_top_ = key_top_ + 30;
        caption_top_ = legend_top_ + row_height * static_cast<double>(chart.points.size() + 1) + 14;
    }

    // The calls' dtypes' roofs are emphasised (solid, bold labels); the others are dashed.
    bool used(const ComputeRoof& roof) const {
        return std::any_of(chart_.dtypes.begin(), chart_.dtypes.end(),
                           [&](DType d) { return peak_flops(device_, d) == roof.peak; });
    }

    void title() {
        const double height = caption_top_ +
                              (chart_.notes.empty() ? 0 : 20 * static_cast<double>(chart_.notes.size() + 1)) +
                              16;
        svg_ = fmt::format(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
            "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"{2}\">\n"
            "<rect x=\"0\" y=\"0\" width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n",
            page_width, height, font_size);
        svg_ += text_element(axes_.left, 30, "start", "font-size=\"18\" font-weight=\"bold\"",
                             fmt::format("Roofline of {}", device_.name));
        svg_ +=
            text_element(axes_.left, 52, "start", "fill=\"#555\"",
                         fmt::format("attainable FLOP/s = min(peak(dtype), intensity × {}/s) · dense peaks · "
                                     "einc's cost model (docs/cost-model.md)",
                                     format_bytes(bw_)));
    }

    // A line per decade, fainter lines at 2..9, the frame and the axis titles.
    void grid() {
        svg_ += "<g class=\"grid\" stroke-width=\"1\">\n";
        for (double decade = axes_.x_min; decade <= axes_.x_max * 1.0001; decade *= 10) {
            for (int m = 2; m < 10 && decade * m < axes_.x_max; ++m)
                svg_ += fmt::format(
                    "<line x1=\"{0:.2f}\" y1=\"{1}\" x2=\"{0:.2f}\" y2=\"{2}\" stroke=\"#f0f0f0\"/>\n",
                    axes_.x(decade * m), axes_.top, axes_.bottom);
            svg_ += fmt::format(
                "<line x1=\"{0:.2f}\" y1=\"{1}\" x2=\"{0:.2f}\" y2=\"{2}\" stroke=\"#d8d8d8\"/>\n",
                axes_.x(decade), axes_.top, axes_.bottom);
            svg_ += text_element(axes_.x(decade), axes_.bottom + 18, "middle", "fill=\"#333\"",
                                 decade_label(decade, false));
        }
        for (double decade = axes_.y_min; decade <= axes_.y_max * 1.0001; decade *= 10) {
            for (int m = 2; m < 10 && decade * m < axes_.y_max; ++m)
                svg_ += fmt::format(
                    "<line x1=\"{0}\" y1=\"{1:.2f}\" x2=\"{2}\" y2=\"{1:.2f}\" stroke=\"#f0f0f0\"/>\n",
                    axes_.left, axes_.y(decade * m), axes_.right);
            svg_ += fmt::format(
                "<line x1=\"{0}\" y1=\"{1:.2f}\" x2=\"{2}\" y2=\"{1:.2f}\" stroke=\"#d8d8d8\"/>\n",
                axes_.left, axes_.y(decade), axes_.right);
            svg_ += text_element(axes_.left - 8, axes_.y(decade) + 4, "end", "fill=\"#333\"",
                                 decade_label(decade, true));
        }
        svg_ += "</g>\n";
        svg_ += fmt::format(
            "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#444\"/>\n",
            axes_.left, axes_.top, axes_.right - axes_.left, axes_.bottom - axes_.top);
        svg_ += text_element((axes_.left + axes_.right) / 2, axes_.bottom + 42, "middle", "font-size=\"13\"",
                             "arithmetic intensity (FLOP per byte moved, log scale)");
        svg_ += fmt::format(
            "<text x=\"0\" y=\"0\" transform=\"translate(26 {:.2f}) rotate(-90)\" text-anchor=\"middle\" "
            "font-size=\"13\">attainable FLOP/s (log scale)</text>\n",
            (axes_.top + axes_.bottom) / 2);
    }

    // Points first in the occupancy, so that no roof or ridge label covers one.
    void occupy_points() {
        for (const ChartPoint& p : chart_.points) {
            const double x = axes_.x(p.intensity), y = axes_.y(p.flops_per_second);
            occupied_.add({x - 7, y - 7, x + 7, y + 7});
        }
    }

    // The memory roof from the left edge to the highest ridge; each compute roof from its ridge.
    void roofs() {
        svg_ += "<g class=\"roofs\" fill=\"none\">\n";
        svg_ += fmt::format("<line class=\"memory-roof\" x1=\"{:.2f}\" y1=\"{:.2f}\" x2=\"{:.2f}\" "
                            "y2=\"{:.2f}\" stroke=\"#222\" "
                            "stroke-width=\"2.5\"/>\n",
                            mx0_, my0_, mx1_, my1_);
        occupied_.add_segment(mx0_, my0_, mx1_, my1_, 2.5);
        for (const ComputeRoof& roof : roofs_) {
            const bool emphasised = used(roof);
            const double y = axes_.y(roof.peak), x0 = axes_.x(roof.peak / bw_);
            svg_ += fmt::format("<line class=\"compute-roof\" x1=\"{:.2f}\" y1=\"{:.2f}\" x2=\"{:.2f}\" "
                                "y2=\"{:.2f}\" stroke=\"{}\" "
                                "stroke-width=\"{}\"{}/>\n",
                                x0, y, axes_.right, y, emphasised ? "#222" : "#999", emphasised ? 2.5 : 1.5,
                                emphasised ? "" : " stroke-dasharray=\"6 4\"");
            occupied_.add_segment(x0, y, axes_.right, y, 2.5);
        }
        svg_ += "</g>\n";
    }

    // A compute roof's label goes above it at the right edge, or below it, or further left along it where
    // that is taken; as a last resort above it at the right edge whatever it covers. The calls' roofs are
    // labelled before the points (`emphasised`), the others after them: they give way.
    void label_roofs(bool emphasised) {
        for (const ComputeRoof& roof : roofs_)
            if (used(roof) == emphasised) svg_ += label_roof(roof);
    }

    // The memory roof's label runs along it, above it, where it covers no point: tried from the left.
    void label_memory_roof() {
        const std::string label = fmt::format("memory  {}/s", format_bytes(bw_));
        const double angle = std::atan2(my1_ - my0_, mx1_ - mx0_), w = text_width(label);
        const double c = std::cos(angle), s = std::sin(angle);
        for (double t = 0.04; t < 0.9; t += 0.02) {
            const double lx = mx0_ + (mx1_ - mx0_) * t, ly = my0_ + (my1_ - my0_) * t;
            if (ly > axes_.bottom - 4 || lx < axes_.left + 4) continue;
            // The text's band: from 4 to 4 + font size above the roof, w along it.
            Occupancy band;
            band.add_segment(lx + 10 * s, ly - 10 * c, lx + w * c + 10 * s, ly + w * s - 10 * c, 6);
            const double ex = lx + w * c, ey = ly + w * s;
            bool fits = ex < axes_.right && ey > axes_.top;
            for (const ChartPoint& p : chart_.points) {
                const double px = axes_.x(p.intensity), py = axes_.y(p.flops_per_second);
                fits = fits && band.free({px - 8, py - 8, px + 8, py + 8});
            }
            if (!fits) continue;
            svg_ += fmt::format("<text x=\"0\" y=\"0\" transform=\"translate({:.2f} {:.2f}) rotate({:.2f})\" "
                                "font-weight=\"bold\">{}</text>\n",
                                lx + 5 * s, ly - 5 * c, angle * 180 / std::numbers::pi, escaped(label));
            occupied_.add_segment(lx + 10 * s, ly - 10 * c, ex + 10 * s, ey - 10 * c, 8);
            break;
        }
    }

    // The ridges of the calls' dtypes: where their compute roof meets the memory roof.
    void ridges() {
        svg_ += "<g class=\"ridges\">\n";
        for (const ComputeRoof& roof : roofs_) {
            if (!used(roof)) continue;
            const double ridge = roof.peak / bw_, x = axes_.x(ridge), y = axes_.y(roof.peak);
            svg_ +=
                fmt::format("<line x1=\"{0:.2f}\" y1=\"{1:.2f}\" x2=\"{0:.2f}\" y2=\"{2}\" stroke=\"#888\" "
                            "stroke-dasharray=\"2 3\"/>\n",
                            x, y + 6, axes_.bottom);
            svg_ += fmt::format("<circle class=\"ridge\" cx=\"{:.2f}\" cy=\"{:.2f}\" r=\"5\" fill=\"white\" "
                                "stroke=\"#222\" stroke-width=\"2\"/>\n",
                                x, y);
            occupied_.add({x - 7, y - 7, x + 7, y + 7});
            // Its label reads up the dotted line from the x axis, where it crowds nothing; beside the marker
            // if something is in the way.
            bool placed = false;
            for (const std::string& label : {fmt::format("ridge {:.3g} FLOP/B ({})", ridge, roof.dtypes),
                                             fmt::format("ridge {:.3g} FLOP/B", ridge)}) {
                const double w = text_width(label);
                const Box box{x - 4 - font_size, axes_.bottom - 6 - w, x - 3, axes_.bottom - 6};
                if (placed || box.y0 < y + 10 || !occupied_.free(box)) continue;
                svg_ += fmt::format(
                    "<text x=\"0\" y=\"0\" transform=\"translate({:.2f} {:.2f}) rotate(-90)\" fill=\"#333\" "
                    "font-style=\"italic\">{}</text>\n",
                    x - 5, axes_.bottom - 6, escaped(label));
                occupied_.add(box);
                placed = true;
            }
            const std::string label = fmt::format("ridge {:.3g} FLOP/B", ridge);
            if (!placed)
                if (const auto at = place_label(label, x, y, 5, occupied_, area_))
                    svg_ += add_label(*at, "fill=\"#333\" font-style=\"italic\"", label);
        }
        svg_ += "</g>\n";
    }

    // Predicted points (filled) and measured ones (hollow, joined to their prediction), then their labels.
    void points() {
        svg_ += "<g class=\"points\">\n";
        for (const ChartPoint& p : chart_.points) {
            if (!p.measured || p.predicted_index < 0) continue;
            const ChartPoint& q = chart_.points[static_cast<std::size_t>(p.predicted_index)];
            svg_ += fmt::format("<line x1=\"{:.2f}\" y1=\"{:.2f}\" x2=\"{:.2f}\" y2=\"{:.2f}\" stroke=\"{}\" "
                                "stroke-width=\"1.5\" "
                                "stroke-dasharray=\"4 3\"/>\n",
                                axes_.x(q.intensity), axes_.y(q.flops_per_second), axes_.x(p.intensity),
                                axes_.y(p.flops_per_second), colour_of(p.call));
        }
        for (std::size_t i = 0; i < chart_.points.size(); ++i) {
            const ChartPoint& p = chart_.points[i];
            const char* colour = colour_of(p.call);
            // Points on one spot are drawn as concentric rings, each later one smaller, so every colour
            // shows.
            std::size_t under = 0;
            for (std::size_t j = 0; j < i; ++j) {
                const ChartPoint& q = chart_.points[j];
                under += q.measured == p.measured &&
                         std::hypot(axes_.x(q.intensity) - axes_.x(p.intensity),
                                    axes_.y(q.flops_per_second) - axes_.y(p.flops_per_second)) < 4;
            }
            const double radius = std::max(2.5, 6 - 2.5 * static_cast<double>(under));
            svg_ +=
                fmt::format("<circle class=\"point {}\" data-tag=\"{}\" cx=\"{:.2f}\" cy=\"{:.2f}\" r=\"{}\" "
                            "fill=\"{}\" stroke=\"{}\" "
                            "stroke-width=\"{}\"><title>{}</title></circle>\n",
                            p.measured ? "measured" : "predicted", escaped(p.tag), axes_.x(p.intensity),
                            axes_.y(p.flops_per_second), radius, p.measured ? "white" : colour,
                            p.measured ? colour : "white", p.measured ? 2.5 : 1.5,
                            escaped(fmt::format("{}: {:.3g} FLOP/B, {}", p.description, p.intensity,
                                                rate(p.flops_per_second))));
        }
        // Labels last. Points that land on one spot (a dot product and a sum have the same intensity) share
        // one label, "1, 4"; a lone point gets "tag pattern" where that fits, else its tag alone.
        std::vector<bool> labelled(chart_.points.size(), false);
        for (std::size_t i = 0; i < chart_.points.size(); ++i) {
            if (labelled[i]) continue;
            const ChartPoint& p = chart_.points[i];
            const double x = axes_.x(p.intensity), y = axes_.y(p.flops_per_second);
            std::vector<std::string> tags;
            for (std::size_t j = i; j < chart_.points.size(); ++j) {
                const ChartPoint& q = chart_.points[j];
                if (!labelled[j] && q.measured == p.measured &&
                    std::hypot(axes_.x(q.intensity) - x, axes_.y(q.flops_per_second) - y) < 4) {
                    labelled[j] = true;
                    tags.push_back(q.tag);
                }
            }
            const std::string tag_text =
                fmt::format("{}{}", fmt::join(tags, ", "), p.measured ? " measured" : "");
            std::vector<std::string> options{tag_text};
            if (tags.size() == 1 && !p.measured)
                options.insert(options.begin(), fmt::format("{}  {}", p.tag, p.pattern));
            for (const std::string& label : options) {
                const auto at = place_label(label, x, y, 6, occupied_, area_);
                if (!at) continue;
                const char* colour = tags.size() == 1 ? colour_of(p.call) : "#333";
                if (at->far) {  // a leader line from the point to the label's nearest edge
                    const double lx = std::clamp(x, at->box.x0, at->box.x1),
                                 ly = std::clamp(y, at->box.y0, at->box.y1);
                    svg_ += fmt::format("<line x1=\"{:.2f}\" y1=\"{:.2f}\" x2=\"{:.2f}\" y2=\"{:.2f}\" "
                                        "stroke=\"{}\" stroke-width=\"1\"/>\n",
                                        x, y, lx, ly, colour);
                }
                svg_ += add_label(*at,
                                  fmt::format("class=\"label\" fill=\"{}\" font-weight=\"bold\" "
                                              "stroke=\"white\" stroke-width=\"3\" "
                                              "paint-order=\"stroke\"",
                                              colour),
                                  label);
                break;
            }
        }
        svg_ += "</g>\n";
    }

    // One row per point, under a key that says what each kind of mark means.
    void legend() {
        constexpr double intensity_right = 660, rate_right = 790, bound_left = 806;
        svg_ += "<g class=\"legend\">\n";
        // The key: what each kind of mark means.
        svg_ += fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"5\" fill=\"#555\"/>\n", legend_left + 6,
                            key_top_ - 4);
        svg_ += text_element(legend_left + 18, key_top_, "start", "", "predicted by the cost model");
        svg_ += fmt::format(
            "<circle cx=\"{}\" cy=\"{}\" r=\"5\" fill=\"white\" stroke=\"#555\" stroke-width=\"2.5\"/>\n",
            legend_left + 226, key_top_ - 4);
        svg_ += text_element(legend_left + 238, key_top_, "start", "", "measured: FLOPs / median time");
        svg_ += fmt::format(
            "<circle cx=\"{}\" cy=\"{}\" r=\"5\" fill=\"white\" stroke=\"#222\" stroke-width=\"2\"/>\n",
            legend_left + 466, key_top_ - 4);
        svg_ += text_element(legend_left + 478, key_top_, "start", "",
                             "ridge: where a compute roof meets the memory roof");
        svg_ += text_element(legend_left, legend_top_, "start", "font-weight=\"bold\"", "point");
        svg_ += text_element(legend_left + 48, legend_top_, "start", "font-weight=\"bold\"", "call · step");
        svg_ += text_element(intensity_right, legend_top_, "end", "font-weight=\"bold\"", "FLOP/B");
        svg_ += text_element(rate_right, legend_top_, "end", "font-weight=\"bold\"", "FLOP/s");
        svg_ += text_element(bound_left, legend_top_, "start", "font-weight=\"bold\"", "bound");
        for (std::size_t i = 0; i < chart_.points.size(); ++i) {
            const ChartPoint& p = chart_.points[i];
            const double y = legend_top_ + row_height * static_cast<double>(i + 1);
            const char* colour = colour_of(p.call);
            svg_ += fmt::format(
                "<circle cx=\"{}\" cy=\"{:.2f}\" r=\"5\" fill=\"{}\" stroke=\"{}\" stroke-width=\"{}\"/>\n",
                legend_left + 6, y - 4, p.measured ? "white" : colour, colour, p.measured ? 2.5 : 1);
            svg_ += text_element(legend_left + 18, y, "start",
                                 fmt::format("fill=\"{}\" font-weight=\"bold\"", colour), p.tag);
            svg_ += text_element(legend_left + 48, y, "start", "", shortened(p.description, 78));
            svg_ += text_element(intensity_right, y, "end", "",
                                 p.intensity >= 1000 ? fmt::format("{:.0f}", p.intensity)
                                                     : fmt::format("{:.3g}", p.intensity));
            svg_ += text_element(rate_right, y, "end", "", rate(p.flops_per_second));
            std::string bound;
            if (p.measured) {
                bound =
                    fmt::format("{:.0f}% of attainable",
                                100 * p.flops_per_second / attainable_flops(device_, p.dtype, p.intensity));
            } else {
                bound = p.compute_bound ? "compute-bound" : "memory-bound";
            }
            svg_ += text_element(bound_left, y, "start", "fill=\"#444\"", bound);
        }
        svg_ += "</g>\n";
    }

    // What has no place on log axes.
    void caption() {
        if (!chart_.notes.empty()) {
            svg_ += "<g class=\"caption\">\n";
            svg_ += text_element(legend_left, caption_top_, "start", "font-weight=\"bold\"",
                                 "Not plotted (no FLOPs, so no place on a log axis):");
            for (std::size_t i = 0; i < chart_.notes.size(); ++i)
                svg_ += text_element(legend_left + 12, caption_top_ + 20 * static_cast<double>(i + 1),
                                     "start", "fill=\"#333\"", shortened(chart_.notes[i], 130));
            svg_ += "</g>\n";
        }
    }

    std::string finish() { return std::move(svg_) + "</svg>\n"; }

private:
    std::string add_label(const Placement& at, std::string_view attributes, std::string_view text) {
        occupied_.add(at.box);
        return text_element(at.x, at.baseline, "start", attributes, text);
    }

    std::string label_roof(const ComputeRoof& roof) {
        const std::string label = fmt::format("{}  {}", roof.dtypes, rate(roof.peak));
        const std::string style = std::string(used(roof) ? "font-weight=\"bold\"" : "fill=\"#666\"") +
                                  " stroke=\"white\" stroke-width=\"3\" paint-order=\"stroke\"";
        const double w = text_width(label), y = axes_.y(roof.peak), ridge_x = axes_.x(roof.peak / bw_);
        for (double x0 = axes_.right - w - 10; x0 >= ridge_x + 6; x0 -= 20)
            for (const double y0 : {y - 4 - label_height, y + 8}) {
                const Placement at = placement_at(x0, y0, w, false);
                if (at.box.inside(area_) && occupied_.free(at.box)) return add_label(at, style, label);
            }
        return add_label(placement_at(axes_.right - w - 10, y - 4 - label_height, w, false), style, label);
    }

    const RooflineChart& chart_;
    const DeviceModel& device_;
    const ChartAxes axes_;
    const Box area_;
    const std::vector<ComputeRoof> roofs_;
    const double bw_;
    double mx0_ = 0, my0_ = 0, mx1_ = 0, my1_ = 0;  // the memory roof's ends, in pixels
    double key_top_ = 0, legend_top_ = 0, caption_top_ = 0;
    Occupancy occupied_;
    std::string svg_;
};

}  // namespace

std::string render_svg(const RooflineChart& chart) {
    Drawing drawing(chart);
    drawing.title();
    drawing.grid();
    drawing.occupy_points();
    drawing.roofs();
    drawing.label_roofs(true);
    drawing.label_memory_roof();
    drawing.ridges();
    drawing.points();
    drawing.label_roofs(false);
    drawing.legend();
    drawing.caption();
    return drawing.finish();
}

}  // namespace einc::cli
