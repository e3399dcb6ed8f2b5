// The roofline chart of `einc roofline` as plain data, the log-log mapping from (FLOP/B, FLOP/s) to SVG
// pixels, and the SVG einc writes for it itself (no plotting dependency; any browser or rsvg shows it).
//
//   RooflineChart chart{.device = device_model_named("h100"), ...};
//   const ChartAxes axes = chart_axes(chart);   // where a point lands: axes.x(intensity), axes.y(flops)
//   std::string svg = render_svg(chart);         // draws every point at exactly that place
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cli/arguments.hpp"
#include "compiler/cost.hpp"
#include "compiler/dtype.hpp"

namespace einc::cli {

struct ChartPoint {
    std::string tag;              // "1", "2.1": the call's number, then the step's when a call has several
    std::string pattern;          // the pattern, written beside the point when there is room
    std::string description;      // the legend's line: operation, pattern, operands, dtype, step kind
    DType dtype = DType::f32;     // the dtype the step computes in (picks its compute roof)
    double intensity = 0;         // FLOP/B
    double flops_per_second = 0;  // predicted: min(peak, intensity * bandwidth); measured: FLOPs / time
    bool measured = false;        // an achieved point (from a timing) rather than the cost model's
    bool compute_bound = false;   // predicted points: which roof holds it
    std::size_t call = 0;         // index of the call it belongs to: picks its colour
    int predicted_index = -1;     // measured points: the predicted point they are drawn beside, if any
};

struct RooflineChart {
    const DeviceModel* device = nullptr;
    std::vector<DType> dtypes;       // the calls' dtypes: their roofs are emphasised, their ridges marked
    std::vector<ChartPoint> points;  // predicted and measured, in legend order
    std::vector<std::string> notes;  // caption lines: what has no place on log axes (views, pure copies)
};

// The plot area in pixels and the data ranges it spans (whole decades), mapped logarithmically.
struct ChartAxes {
    double x_min = 0.1, x_max = 1e4;   // FLOP/B at the left and right edges
    double y_min = 1e9, y_max = 1e16;  // FLOP/s at the bottom and top edges
    double left = 0, right = 0, top = 0, bottom = 0;

    double x(double intensity) const;         // pixel column of an intensity
    double y(double flops_per_second) const;  // pixel row of a rate (rows grow downwards)
};

// The axes render_svg draws `chart` on: every point, roof and ridge inside, with some room around them.
ChartAxes chart_axes(const RooflineChart& chart);

// The whole SVG document.
std::string render_svg(const RooflineChart& chart);

// One compute roof: the dtypes of the device sharing one dense peak ("bf16 · f16", 989.4e12).
struct ComputeRoof {
    std::string dtypes;
    double peak = 0;
};
std::vector<ComputeRoof> compute_roofs(const DeviceModel& device);

// A call's measured time, from `einc bench` (--timings) or timed on the spot (--measure).
struct CallTiming {
    double seconds = 0;  // median per call
    std::string how;     // "cpu backend, median of 10"
};

// The chart `einc roofline` draws for `calls` on `device`: a predicted point per plan step with FLOPs, at
// the step's intensity and min(peak, intensity * bandwidth); a caption note for each step without FLOPs
// (views, copies); and for each call with a timing, an achieved point at the call's total intensity.
RooflineChart roofline_chart(std::span<const CallArgs> calls, const DeviceModel& device,
                             std::span<const std::optional<CallTiming>> timings = {});

}  // namespace einc::cli
