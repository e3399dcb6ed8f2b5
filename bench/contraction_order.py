#!/usr/bin/env python3
"""einc's contraction-order search beside opt_einsum's contract_path, on the same networks.

Writes the networks for build/bench/contraction_order_bench (einc's search, timed in C++), runs
opt_einsum's greedy, dp, branch-2 and random-greedy on each (and dp with outer products searched, the
optimum, where it finishes), counts every order's FLOPs by one rule (opt_einsum's, which einc uses:
a pairwise contraction over the axes U costs product(U), twice that when an axis is summed), and writes
a markdown table and a JSON file.

    pip install opt_einsum   # benchmark-only dependency
    python3 bench/contraction_order.py build/bench/contraction_order_bench bench/results/contraction-order
"""
import json
import platform
import random
import signal
import subprocess
import sys
import time

import opt_einsum as oe


# ---- networks ------------------------------------------------------------------------------------------

class Net:
    def __init__(self, name):
        self.name, self.sizes, self.operands, self.output = name, [], [], []

    def axis(self, size):
        self.sizes.append(size)
        return len(self.sizes) - 1

    def finish(self):
        self.operands = [sorted(set(o)) for o in self.operands]
        self.output = sorted(set(self.output))
        return self


def random_net(seed, n, largest=6):
    """A random tree of bonds, n/4 more bonds, open axes, now and then a hyperedge or a batch axis."""
    rng = random.Random(seed)
    net = Net(f"random-{n}-s{seed}")
    net.operands = [[] for _ in range(n)]

    def bond(x, y):
        a = net.axis(rng.randint(2, largest))
        net.operands[x].append(a)
        net.operands[y].append(a)
        return a

    for i in range(1, n):
        bond(i, rng.randrange(i))
    for _ in range(n // 4):
        x, y = rng.sample(range(n), 2)
        bond(x, y)
    for _ in range(1 + n // 5):
        net.output.append(bond(rng.randrange(n), rng.randrange(n)))
    if rng.random() < 0.3:
        a = bond(*rng.sample(range(n), 2))
        net.operands[rng.randrange(n)].append(a)
    if rng.random() < 0.2:
        a = net.axis(rng.randint(2, 4))
        for o in net.operands:
            o.append(a)
        net.output.append(a)
    return net.finish()


def chain(n, seed):
    rng = random.Random(seed)
    net = Net(f"chain-{n}")
    axes = [net.axis(rng.randint(2, 64)) for _ in range(n + 1)]
    net.operands = [[axes[i], axes[i + 1]] for i in range(n)]
    net.output = [axes[0], axes[-1]]
    return net.finish()


def ladder(n, bond=16, physical=2):
    """<psi|psi> of an MPS: two rows of n/2 tensors, bonds along each row, physical axes between them."""
    net = Net(f"mps-overlap-{n}")
    half = n // 2
    top = [net.axis(bond) for _ in range(half - 1)]
    bottom = [net.axis(bond) for _ in range(half - 1)]
    phys = [net.axis(physical) for _ in range(half)]
    for row in (top, bottom):
        for i in range(half):
            net.operands.append(([row[i - 1]] if i else []) + ([row[i]] if i < half - 1 else []) + [phys[i]])
    return net.finish()


def grid(rows, cols, bond=3, open_axes=False):
    net = Net(f"grid-{rows}x{cols}" + ("-open" if open_axes else ""))
    net.operands = [[] for _ in range(rows * cols)]
    for r in range(rows):
        for c in range(cols):
            if c + 1 < cols:
                a = net.axis(bond)
                net.operands[r * cols + c].append(a)
                net.operands[r * cols + c + 1].append(a)
            if r + 1 < rows:
                a = net.axis(bond)
                net.operands[r * cols + c].append(a)
                net.operands[(r + 1) * cols + c].append(a)
            if open_axes and r == 0:
                a = net.axis(2)
                net.operands[c].append(a)
                net.output.append(a)
    return net.finish()


def star(n):
    net = Net(f"star-{n}")
    hub = net.axis(8)
    for i in range(n):
        net.operands.append([hub, net.axis(2 + i % 5)])
    net.output = [hub]
    return net.finish()


def regular(n, seed, bond=2):
    """A random 3-regular graph (a quantum circuit's shape), bond 2, closed."""
    rng = random.Random(seed)
    net = Net(f"3-regular-{n}-s{seed}")
    while True:
        stubs = [i for i in range(n) for _ in range(3)]
        rng.shuffle(stubs)
        edges = [(stubs[2 * k], stubs[2 * k + 1]) for k in range(len(stubs) // 2)]
        if all(x != y for x, y in edges):
            break
    net.operands = [[] for _ in range(n)]
    for x, y in edges:
        a = net.axis(bond)
        net.operands[x].append(a)
        net.operands[y].append(a)
    return net.finish()


def issue_example():
    # a b c d e f g h, a i, b j, c k, d l, e m, f, g n, h o -> n i k m j l o
    net = Net("issue-32-example")
    s = dict(a=4, b=5, c=15, d=2, e=16, f=22, g=27, h=8, i=14, j=15, k=18, l=59, m=22, n=6, o=39)
    ids = {k: net.axis(v) for k, v in s.items()}
    for term in ["abcdefgh", "ai", "bj", "ck", "dl", "em", "f", "gn", "ho"]:
        net.operands.append([ids[c] for c in term])
    net.output = [ids[c] for c in "nikmjlo"]
    return net.finish()


def networks():
    nets = [issue_example()]
    for n in range(9, 17):
        nets += [random_net(100 + n, n), random_net(200 + n, n, largest=3)]
    nets += [chain(12, 1), chain(16, 2), ladder(12), ladder(16), grid(3, 4), grid(4, 4), grid(4, 4, 2, True),
             star(12), star(16), regular(12, 1), regular(16, 2)]
    for n in (17, 20, 25, 30, 40, 50, 60, 75, 100):
        nets.append(random_net(300 + n, n))
    nets += [chain(100, 3), ladder(40), ladder(100), grid(5, 5), grid(6, 6), grid(8, 8, 2), grid(10, 10, 2),
             star(50), regular(20, 3), regular(30, 4), regular(50, 5), regular(100, 6)]
    return nets


# ---- counting ------------------------------------------------------------------------------------------

def count(net, path):
    """FLOPs and largest intermediate of a path over the shrinking operand list, opt_einsum's count."""
    live = [set(o) for o in net.operands]
    out = set(net.output)
    flops, largest = 0.0, 0.0

    def size(axes):
        p = 1.0
        for a in axes:
            p *= net.sizes[a]
        return p

    for step in path:
        step = sorted(step, reverse=True)
        taken = [live.pop(i) for i in step]
        rest = set().union(out, *live)
        union = set().union(*taken)
        kept = union & rest
        flops += size(union) * (max(1, len(taken) - 1) + (1 if kept != union else 0))
        largest = max(largest, size(kept))
        live.append(kept)
    return flops, largest


# ---- opt_einsum ----------------------------------------------------------------------------------------

class Timeout(Exception):
    pass


def on_alarm(signum, frame):
    raise Timeout()


def opt_einsum_path(net, optimize, limit_s):
    eq = ",".join("".join(oe.get_symbol(a) for a in o) for o in net.operands)
    eq += "->" + "".join(oe.get_symbol(a) for a in net.output)
    shapes = [tuple(net.sizes[a] for a in o) for o in net.operands]
    signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, limit_s)
    try:
        start = time.perf_counter()
        path, _ = oe.contract_path(eq, *shapes, shapes=True, optimize=optimize)
        seconds = time.perf_counter() - start
    except Timeout:
        return None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    flops, largest = count(net, path)
    return {"flops": flops, "largest": largest, "seconds": seconds}


def main():
    bench, prefix = sys.argv[1], sys.argv[2]
    limit_s = float(sys.argv[3]) if len(sys.argv) > 3 else 20.0
    nets = networks()
    lines = []
    for net in nets:
        ops = ";".join(" ".join(map(str, o)) for o in net.operands)
        lines.append(f"{net.name}|{' '.join(map(str, net.sizes))}|{ops}|{' '.join(map(str, net.output))}")
    einc = {}
    answer = subprocess.run([bench], input="\n".join(lines) + "\n", capture_output=True, text=True, check=True)
    for line in answer.stdout.splitlines():
        name, search, flops, largest, pairs, seconds = line.split("|")
        path = [tuple(map(int, p.split())) for p in pairs.split(",")]
        einc[name] = {"search": search, "flops": float(flops), "largest": float(largest),
                      "seconds": float(seconds), "recounted": count(next(n for n in nets if n.name == name), path)[0]}
    # opt_einsum's answers of an earlier run with the same prefix are reused (they take minutes).
    earlier = {}
    try:
        with open(prefix + ".json") as f:
            earlier = {r["name"]: r for r in json.load(f)["rows"]}
    except (OSError, ValueError, KeyError):
        pass
    rows = []
    for net in nets:
        n = len(net.operands)
        row = {"name": net.name, "operands": n, "einc": einc[net.name]}
        optimizers = {"greedy": "greedy", "branch-2": "branch-2", "random-greedy": "random-greedy",
                      "dp": "dp"}
        if n <= 16:
            optimizers["dp-outer"] = oe.DynamicProgramming(search_outer=True)
        for key, optimize in optimizers.items():
            if net.name in earlier and key in earlier[net.name]:
                row[key] = earlier[net.name][key]
                continue
            row[key] = opt_einsum_path(net, optimize, limit_s)
            print(net.name, key, row[key], file=sys.stderr, flush=True)
        rows.append(row)
    meta = {"machine": platform.processor() or platform.machine(), "python": platform.python_version(),
            "opt_einsum": oe.__version__, "time_limit_s": limit_s}
    with open(prefix + ".json", "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1)
    with open(prefix + ".md", "w") as f:
        f.write(markdown(rows, meta))


def fmt_flops(x):
    return "-" if x is None else f"{x:.3g}"


def fmt_ms(s):
    return "-" if s is None else (f"{s * 1e3:.2f}" if s < 10 else f"{s:.0f} s")


def markdown(rows, meta):
    out = [f"opt_einsum {meta['opt_einsum']}, Python {meta['python']}; einc's planning time is the median of "
           "repeated warm calls of contraction_order() (C++), opt_einsum's one call of contract_path; "
           f"'-': not finished within {meta['time_limit_s']:.0f} s. FLOPs by opt_einsum's count.", ""]
    out.append("| network | operands | einc search | einc FLOPs | optimum (dp, outer products searched) | "
               "einc / optimum | opt_einsum greedy | best of dp, branch-2, random-greedy | einc / greedy | "
               "einc / best | einc ms | greedy ms | dp ms | branch-2 ms | random-greedy ms |")
    out.append("|" + " --- |" * 15)
    for r in rows:
        e = r["einc"]
        best = [r[k]["flops"] for k in ("dp", "branch-2", "random-greedy", "dp-outer") if r.get(k)]
        best = min(best) if best else None
        optimum = r["dp-outer"]["flops"] if r.get("dp-outer") else None
        greedy = r["greedy"]["flops"] if r.get("greedy") else None

        def ratio(x):
            return "-" if not x else f"{e['flops'] / x:.3f}"

        def ms(k):
            return fmt_ms(r[k]["seconds"]) if r.get(k) else "-"

        out.append(f"| {r['name']} | {r['operands']} | {e['search']} | {fmt_flops(e['flops'])} | {fmt_flops(optimum)} | "
                   f"{ratio(optimum)} | {fmt_flops(greedy)} | {fmt_flops(best)} | {ratio(greedy)} | {ratio(best)} | "
                   f"{fmt_ms(e['seconds'])} | {ms('greedy')} | {ms('dp')} | {ms('branch-2')} | {ms('random-greedy')} |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    main()
