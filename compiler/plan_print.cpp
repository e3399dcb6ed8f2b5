// Printing plans: the text `einc explain` shows, and its JSON form.
#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <optional>

#include "compiler/gpu_model.hpp"
#include "compiler/schedule.hpp"
#include "grammar/diagnostic.hpp"

namespace einc {
namespace {

std::string buffer_name(Buffer buffer) {
    const std::string_view parts = buffer.parts ? " re,im" : "";
    switch (buffer.kind) {
    case Buffer::Kind::input: return fmt::format("in {}{}", buffer.index, parts);
    case Buffer::Kind::output: return fmt::format("out {}{}", buffer.index, parts);
    case Buffer::Kind::temporary: return fmt::format("t{}{}", buffer.index, parts);
    }
    return "?";
}

std::string access_line(std::string_view role, const Access& access) {
    return fmt::format("{:<4} {:<6} {}{}", role, buffer_name(access.buffer), to_string(access.layout),
                       access.offset != 0 ? fmt::format("  offset {}", access.offset) : "");
}

// (outer,batch,rows,cols):(strides), or without the outer mode where there is none.
std::string matrix_line(char role, const Gemm& gemm, const GemmMatrix& m, std::int64_t rows,
                        std::int64_t cols) {
    Layout layout = m.layout(gemm.outer, gemm.batch, rows, cols);
    if (gemm.outer == 1) layout.modes.erase(layout.modes.begin());
    return fmt::format("{}    {:<6} {}  {}  ld {}{}", role, buffer_name(m.buffer), to_string(layout),
                       m.row_major() ? "row-major" : "col-major", m.leading_dimension(),
                       m.offset != 0 ? fmt::format("  offset {}", m.offset) : "");
}

// "out 0 = 0.5 * result + 1 * out 0": what a step with an epilogue stores (nothing for the identity).
std::optional<std::string> epilogue_line(const Step& step) {
    const Epilogue e = epilogue_of(step);
    if (e.identity()) return std::nullopt;
    const std::string out = buffer_name(std::visit(Overloaded{[](const View& v) { return v.source.buffer; },
                                                              [](const Gemm& g) { return g.c.buffer; },
                                                              [](const auto& s) { return s.dst.buffer; }},
                                                   step));
    if (!e.reads_output()) return fmt::format("{} = {} * result", out, e.alpha);
    return fmt::format("{} = {} * result {} {} * {}", out, e.alpha, e.beta < 0 ? '-' : '+', std::fabs(e.beta),
                       out);
}

std::vector<std::string> step_details(const Step& step) {
    std::vector<std::string> lines = std::visit(
        Overloaded{
            [](const View& view) {
                return std::vector<std::string>{
                    fmt::format("out {} = {}", view.output, access_line("", view.source).substr(5))};
            },
            [](const Copy& copy) {
                return std::vector<std::string>{access_line("src", copy.src), access_line("dst", copy.dst)};
            },
            [](const Reduce& reduce) {
                return std::vector<std::string>{fmt::format("op   {}", name_of(reduce.op)),
                                                access_line("src", reduce.src),
                                                access_line("dst", reduce.dst)};
            },
            [](const Contract& contract) {
                std::vector<std::string> lines;
                for (const Access& src : contract.srcs) lines.push_back(access_line("src", src));
                lines.push_back(access_line("dst", contract.dst));
                return lines;
            },
            [](const Route& route) {
                return std::vector<std::string>{
                    fmt::format("op   {}  kept modes {}", name_of(route.op), route.kept),
                    access_line("src", route.src), access_line("grad", route.grad),
                    access_line("dst", route.dst)};
            },
            [](const Gemm& gemm) {
                return std::vector<std::string>{
                    fmt::format("{}batch {}  m {}  n {}  k {}",
                                gemm.outer == 1 ? "" : fmt::format("outer {}  ", gemm.outer), gemm.batch,
                                gemm.m, gemm.n, gemm.k),
                    matrix_line('A', gemm, gemm.a, gemm.m, gemm.k),
                    matrix_line('B', gemm, gemm.b, gemm.k, gemm.n),
                    matrix_line('C', gemm, gemm.c, gemm.m, gemm.n)};
            },
        },
        step);
    if (auto line = epilogue_line(step)) lines.push_back(std::move(*line));
    return lines;
}

std::string cost_line(const Cost& cost, const DeviceModel& device, DType dtype) {
    const RooflineBound roof = roofline_bound(cost, device, dtype);
    const std::string workspace =
        cost.workspace_bytes > 0 ? fmt::format("workspace {}", format_bytes(cost.workspace_bytes)) : "";
    if (roof == RooflineBound::free)
        return workspace.empty() ? "free: no FLOPs, no bytes moved"
                                 : "no FLOPs, no bytes moved; " + workspace;
    return fmt::format("{}  read {}  write {}{}  intensity {:.3g} FLOP/B  {}-bound  {}",
                       format_flops(cost.flops), format_bytes(cost.bytes_read),
                       format_bytes(cost.bytes_written), workspace.empty() ? "" : "  " + workspace,
                       cost.intensity(), name_of(roof), format_seconds(step_seconds(cost, device, dtype)));
}

// The GPU model's prediction for a step of generated kernels on `device` (nothing for other steps, CPU
// schedules, or a device with no fitted parameters).
std::optional<StepPrediction> model_of(const Plan& plan, const Schedule& schedule, std::size_t step,
                                       const DeviceModel& device) {
    const GpuParameters* gpu = gpu_parameters(device.key);
    if (!gpu || schedule.target.backend != Backend::cuda) return std::nullopt;
    return predict_step(plan, schedule, step, *gpu);
}

// model_of every step, made once for a printout: the model's predictions are the expensive part of one.
std::vector<std::optional<StepPrediction>> models_of(const Plan& plan, const Schedule& schedule,
                                                     const DeviceModel& device) {
    std::vector<std::optional<StepPrediction>> models;
    for (std::size_t s = 0; s < plan.steps.size(); ++s) models.push_back(model_of(plan, schedule, s, device));
    return models;
}

// The least time of step `s`: the GPU model's prediction where it covers the step (`model`), else its
// roofline time after the device's step floor.
double predicted_seconds(const std::optional<StepPrediction>& model, const Plan& plan,
                         const Schedule& schedule, std::size_t s, const DeviceModel& device) {
    if (model) return model->seconds;
    return step_seconds(scheduled_step_cost(plan, schedule, s), device,
                        compute_dtype(plan, plan.steps[s].step));
}

// "model  einc_tiles_...  36.5 us  77% of HBM  limited by bandwidth: 2 waves, 65.5 kB in flight per SM,
// 100% of sector bytes used, chain 4"
std::string model_line(const KernelLaunch& launch, const KernelPrediction& k, const DeviceModel& device) {
    return fmt::format(
        "model  {}  {}  {:.0f}% of HBM  limited by {}: {:.0f} wave{}, {} in flight per SM, {:.0f}% of "
        "sector bytes used, chain {:.0f}{}",
        launch.signature.name(), format_seconds(k.seconds),
        100 * k.useful_bytes / k.seconds / device.bandwidth, name_of(k.limited_by), k.waves,
        k.waves == 1 ? "" : "s", format_bytes(k.bytes_in_flight_per_sm), 100 * k.sector_efficiency,
        k.serial_chain, k.l2_resident ? " (its data in L2)" : "");
}

// What the local search after the greedy runs changed.
std::string reordered(const ContractionPath& path) {
    if (path.subtrees_reordered == 0) return "";
    return fmt::format(", then {} subtree{} reordered exhaustively", path.subtrees_reordered,
                       path.subtrees_reordered == 1 ? "" : "s");
}

// How the order was found, and whether it is proven optimal.
std::string describe_search(const ContractionPath& path) {
    switch (path.search) {
    case PathSearch::exhaustive: return "optimal";
    case PathSearch::dynamic_programming: return "optimal, by dynamic programming";
    case PathSearch::greedy:
        return path.greedy_runs > 1 ? fmt::format("greedy, the best of {} greedy runs{}, not proven optimal",
                                                  path.greedy_runs, reordered(path))
                                    : fmt::format("greedy{}, not proven optimal", reordered(path));
    case PathSearch::random_greedy:
        return fmt::format("randomised greedy, the best of {} greedy runs{}, not proven optimal",
                           path.greedy_runs, reordered(path));
    case PathSearch::chosen: return "as chosen";
    }
    return "";
}

std::string_view name_of(PathSearch search) {
    switch (search) {
    case PathSearch::exhaustive: return "exhaustive";
    case PathSearch::dynamic_programming: return "dynamic_programming";
    case PathSearch::greedy: return "greedy";
    case PathSearch::random_greedy: return "random_greedy";
    case PathSearch::chosen: return "chosen";
    }
    return "";
}

// The dtype the call computes in: its inputs' promoted dtype (f32 for a call without inputs).
DType call_dtype(const Plan& plan) {
    std::vector<DType> dtypes;
    for (const TensorSpec& input : plan.inputs) dtypes.push_back(input.dtype);
    return dtypes.empty() ? DType::f32 : promote_types(dtypes);
}

}  // namespace

std::string print_plan(const Plan& plan, const Schedule& schedule, const DeviceModel& device) {
    const DType dtype = call_dtype(plan);
    std::string dtypes(name_of(dtype));
    if (std::ranges::any_of(plan.inputs, [&](const TensorSpec& input) { return input.dtype != dtype; })) {
        std::vector<std::string_view> names;
        for (const TensorSpec& input : plan.inputs) names.push_back(name_of(input.dtype));
        dtypes = fmt::format("{} promoted to {}", fmt::join(names, " "), name_of(dtype));
    }
    std::string out =
        fmt::format("plan ({}, {} step{})\n", dtypes, plan.steps.size(), plan.steps.size() == 1 ? "" : "s");
    if (plan.path) {
        const ContractionPath& path = *plan.path;
        std::vector<std::string> pairs;
        for (const auto& [i, j] : path.pairs) pairs.push_back(fmt::format("({}, {})", i, j));
        out += fmt::format("  contraction order ({}): {}\n", describe_search(path), fmt::join(pairs, ", "));
        out +=
            fmt::format("    naive {}, optimized {} ({:.3g}x fewer), largest intermediate {:.3g} elements\n",
                        format_flops(path.naive_flops), format_flops(path.optimized_flops),
                        path.optimized_flops > 0 ? path.naive_flops / path.optimized_flops : 1.0,
                        path.largest_intermediate);
    }
    for (std::size_t t = 0; t < plan.temporaries.size(); ++t) {
        const TensorSpec& temp = plan.temporaries[t];
        out += fmt::format("  t{}: {} {}\n", t, name_of(temp.dtype), format_shape(temp.shape));
    }
    const std::vector<std::optional<StepPrediction>> models = models_of(plan, schedule, device);
    for (std::size_t s = 0; s < plan.steps.size(); ++s) {
        const PlanStep& step = plan.steps[s];
        out += fmt::format("  {}. {:<8} {}\n", s + 1, step_kind(step.step), step.why);
        for (const std::string& line : step_details(step.step)) out += fmt::format("       {}\n", line);
        out += fmt::format("       {}\n", cost_line(scheduled_step_cost(plan, schedule, s), device,
                                                    compute_dtype(plan, step.step)));
        if (const auto& model = models[s]) {
            const auto& launches = std::get<strategy::Kernels>(schedule.steps[s].strategy).launches;
            for (std::size_t k = 0; k < launches.size(); ++k)
                out += fmt::format("       {}\n", model_line(launches[k], model->kernels[k], device));
        }
    }
    const Cost total = scheduled_cost(plan, schedule);
    out += fmt::format("total: {}, read {}, write {}, workspace {}, intensity {:.3g} FLOP/B\n",
                       format_flops(total.flops), format_bytes(total.bytes_read),
                       format_bytes(total.bytes_written), format_bytes(total.workspace_bytes),
                       total.intensity());
    // (the ridge of the dtype the FLOPs are done in: a mean of i8 computes in f64)
    const auto heaviest = std::ranges::max_element(
        plan.steps, [](const PlanStep& a, const PlanStep& b) { return a.cost.flops < b.cost.flops; });
    const DType flops_dtype = heaviest == plan.steps.end() ? dtype : compute_dtype(plan, heaviest->step);
    out += fmt::format("bound: {}\n", describe_bound(total, device, flops_dtype));
    double seconds = 0;
    for (const PlanStep& step : plan.steps)
        seconds += step_seconds(step.cost, device, compute_dtype(plan, step.step));
    out += fmt::format("time:  >= {} on {} (roofline, {} per step, steps in sequence)\n",
                       format_seconds(seconds), device.name, describe_step_floor(device));
    // The GPU model where it covers a step, the roofline elsewhere (views, library GEMMs).
    double modelled = 0;
    bool any = false;
    for (std::size_t s = 0; s < plan.steps.size(); ++s) {
        any = any || models[s];
        modelled += predicted_seconds(models[s], plan, schedule, s, device);
    }
    if (any)
        out += fmt::format(
            "model: {} on {} (the GPU model's kernels, called again and again, steps in sequence)\n",
            format_seconds(modelled), device.name);
    return out;
}

namespace {

// Just enough JSON: objects and arrays written in order, strings escaped.
class Json {
public:
    std::string text;

    Json& open(char bracket) {
        separate();
        text += bracket;
        first_ = true;
        return *this;
    }
    Json& close(char bracket) {
        text += bracket;
        first_ = false;
        return *this;
    }
    Json& key(std::string_view name) {
        separate();
        string(name);
        text += ':';
        first_ = true;
        return *this;
    }
    Json& value(std::string_view s) {
        separate();
        string(s);
        return *this;
    }
    Json& value(double v) {
        separate();
        text += std::isfinite(v) ? fmt::format("{}", v) : "null";
        return *this;
    }
    Json& value(std::int64_t v) {
        separate();
        text += fmt::format("{}", v);
        return *this;
    }
    Json& value(bool v) {
        separate();
        text += v ? "true" : "false";
        return *this;
    }
    Json& value(const char* s) { return value(std::string_view(s)); }  // not the bool overload
    Json& array(std::span<const std::int64_t> values) {
        open('[');
        for (const std::int64_t v : values) value(v);
        return close(']');
    }

private:
    void separate() {
        if (!first_) text += ',';
        first_ = false;
    }
    void string(std::string_view s) {
        text += '"';
        for (const char c : s) {
            if (c == '"' || c == '\\') text += '\\';
            if (static_cast<unsigned char>(c) < 0x20)
                text += fmt::format("\\u{:04x}", c);
            else
                text += c;
        }
        text += '"';
    }
    bool first_ = true;
};

void write_tensors(Json& json, std::string_view name, const std::vector<TensorSpec>& tensors) {
    json.key(name).open('[');
    for (const TensorSpec& t : tensors) {
        json.open('{')
            .key("dtype")
            .value(name_of(t.dtype))
            .key("shape")
            .array(t.shape)
            .key("strides")
            .array(t.strides)
            .close('}');
    }
    json.close(']');
}

void write_access(Json& json, std::string_view name, const Access& access) {
    json.key(name)
        .open('{')
        .key("buffer")
        .value(buffer_name(access.buffer))
        .key("offset")
        .value(access.offset);
    json.key("shape").array(access.layout.extents()).key("strides").array(access.layout.strides()).close('}');
}

void write_cost(Json& json, const Cost& cost, const DeviceModel& device, DType dtype, double predicted) {
    json.key("flops")
        .value(cost.flops)
        .key("bytes_read")
        .value(cost.bytes_read)
        .key("bytes_written")
        .value(cost.bytes_written);
    json.key("workspace_bytes").value(cost.workspace_bytes).key("intensity").value(cost.intensity());
    json.key("bound").value(name_of(roofline_bound(cost, device, dtype)));
    json.key("predicted_seconds").value(predicted);
}

// The GPU model's view of a step: what limits it and the figures behind it (its slowest kernel's), then
// each kernel's.
void write_model(Json& json, const StepPrediction& model, const std::vector<KernelLaunch>& launches) {
    const auto slowest = std::max_element(model.kernels.begin(), model.kernels.end(),
                                          [](const auto& a, const auto& b) { return a.seconds < b.seconds; });
    double chain = 0;
    for (const KernelPrediction& k : model.kernels) chain = std::max(chain, k.serial_chain);
    json.key("model").open('{');
    json.key("launches").value(static_cast<std::int64_t>(model.kernels.size()));
    json.key("limited_by").value(name_of(model.limited_by()));
    json.key("sector_efficiency").value(slowest->sector_efficiency);
    json.key("bytes_in_flight_per_sm").value(slowest->bytes_in_flight_per_sm);
    json.key("waves").value(slowest->waves);
    json.key("serial_chain").value(chain);
    json.key("kernels").open('[');
    for (std::size_t k = 0; k < model.kernels.size(); ++k) {
        const KernelPrediction& p = model.kernels[k];
        json.open('{')
            .key("name")
            .value(launches[k].signature.name())
            .key("predicted_seconds")
            .value(p.seconds);
        json.key("limited_by").value(name_of(p.limited_by)).key("hbm_bytes").value(p.hbm_bytes);
        json.key("sector_efficiency").value(p.sector_efficiency);
        json.key("bytes_in_flight_per_sm").value(p.bytes_in_flight_per_sm).key("waves").value(p.waves);
        json.key("rounds").value(p.rounds).key("serial_chain").value(p.serial_chain);
        json.key("resident_blocks").value(static_cast<std::int64_t>(p.resident_blocks));
        json.key("l2_resident").value(p.l2_resident).close('}');
    }
    json.close(']').close('}');
}

}  // namespace

std::string json_quoted(std::string_view text) {
    Json json;
    json.value(text);
    return json.text;
}

std::string plan_to_json(const Plan& plan, const Schedule& schedule, const DeviceModel& device) {
    const DType dtype = call_dtype(plan);
    Json json;
    json.open('{')
        .key("op")
        .value(name_of(plan.op))
        .key("dtype")
        .value(name_of(dtype))
        .key("device")
        .value(device.key);
    write_tensors(json, "inputs", plan.inputs);
    write_tensors(json, "outputs", plan.outputs);
    write_tensors(json, "temporaries", plan.temporaries);
    json.key("backend").value(name_of(schedule.target.backend));
    const std::vector<std::optional<StepPrediction>> models = models_of(plan, schedule, device);
    json.key("steps").open('[');
    for (std::size_t s = 0; s < plan.steps.size(); ++s) {
        const PlanStep& step = plan.steps[s];
        const ScheduledStep& scheduled = schedule.steps[s];
        json.open('{').key("kind").value(step_kind(step.step)).key("why").value(step.why);
        json.key("strategy")
            .value(name_of(scheduled.strategy))
            .key("accumulator")
            .value(name_of(scheduled.accumulator));
        json.key("scratch_bytes").value(scheduled.scratch_bytes);
        if (const Epilogue e = epilogue_of(step.step); !e.identity())
            json.key("epilogue").open('{').key("alpha").value(e.alpha).key("beta").value(e.beta).close('}');
        if (const auto* kernels = std::get_if<strategy::Kernels>(&scheduled.strategy);
            kernels && !kernels->launches.empty()) {
            json.key("kernels").open('[');
            for (const KernelLaunch& launch : kernels->launches) json.value(launch.signature.name());
            json.close(']');
        }
        std::visit(Overloaded{
                       [&](const View& view) {
                           json.key("output").value(static_cast<std::int64_t>(view.output));
                           write_access(json, "source", view.source);
                       },
                       [&](const Copy& copy) {
                           write_access(json, "src", copy.src);
                           write_access(json, "dst", copy.dst);
                       },
                       [&](const Reduce& reduce) {
                           json.key("reduction").value(name_of(reduce.op));
                           write_access(json, "src", reduce.src);
                           write_access(json, "dst", reduce.dst);
                       },
                       [&](const Contract& contract) {
                           json.key("srcs").open('[');
                           for (const Access& src : contract.srcs) {
                               json.open('{')
                                   .key("buffer")
                                   .value(buffer_name(src.buffer))
                                   .key("offset")
                                   .value(src.offset);
                               json.key("shape")
                                   .array(src.layout.extents())
                                   .key("strides")
                                   .array(src.layout.strides())
                                   .close('}');
                           }
                           json.close(']');
                           write_access(json, "dst", contract.dst);
                       },
                       [&](const Route& route) {
                           json.key("reduction")
                               .value(name_of(route.op))
                               .key("kept_modes")
                               .value(static_cast<std::int64_t>(route.kept));
                           write_access(json, "src", route.src);
                           write_access(json, "grad", route.grad);
                           write_access(json, "dst", route.dst);
                       },
                       [&](const Gemm& gemm) {
                           if (gemm.outer != 1) json.key("outer").value(gemm.outer);
                           json.key("batch").value(gemm.batch);
                           json.key("m").value(gemm.m).key("n").value(gemm.n).key("k").value(gemm.k);
                           for (const auto& [name, m] :
                                {std::pair{"a", gemm.a}, std::pair{"b", gemm.b}, std::pair{"c", gemm.c}}) {
                               json.key(name)
                                   .open('{')
                                   .key("buffer")
                                   .value(buffer_name(m.buffer))
                                   .key("offset")
                                   .value(m.offset);
                               if (gemm.outer != 1) json.key("outer_stride").value(m.outer_stride);
                               json.key("batch_stride").value(m.batch_stride);
                               json.key("row_stride").value(m.row_stride);
                               json.key("col_stride").value(m.col_stride).close('}');
                           }
                       },
                   },
                   step.step);
        write_cost(json, scheduled_step_cost(plan, schedule, s), device, compute_dtype(plan, step.step),
                   predicted_seconds(models[s], plan, schedule, s, device));
        if (models[s])
            write_model(json, *models[s], std::get<strategy::Kernels>(scheduled.strategy).launches);
        json.close('}');
    }
    json.close(']');
    // The total: the steps' predictions in sequence.
    double total_predicted = 0;
    for (std::size_t s = 0; s < plan.steps.size(); ++s)
        total_predicted += predicted_seconds(models[s], plan, schedule, s, device);
    json.key("total").open('{');
    write_cost(json, scheduled_cost(plan, schedule), device, dtype, total_predicted);
    json.close('}');
    if (plan.path) {
        json.key("path").open('{').key("optimal").value(plan.path->optimal);
        json.key("search").value(name_of(plan.path->search)).key("pairs").open('[');
        for (const auto& [i, j] : plan.path->pairs)
            json.array(Shape{static_cast<std::int64_t>(i), static_cast<std::int64_t>(j)});
        json.close(']')
            .key("naive_flops")
            .value(plan.path->naive_flops)
            .key("optimized_flops")
            .value(plan.path->optimized_flops);
        json.key("largest_intermediate").value(plan.path->largest_intermediate).close('}');
    }
    json.close('}');
    return json.text + "\n";
}

}  // namespace einc
