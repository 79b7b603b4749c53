"""Terminal tables of the commands' results: measurements, extrapolations, max-plus and pipeline predictions."""

from __future__ import annotations

from typing import Any


def print_measurements(records: list[dict]) -> None:
    """One line per record: kernel, phase, size, the modelling figure (p10) and its interval, the median, samples,
    checked, share or GB/s."""
    print(f"{'kernel':<16} {'phase':<18} {'size':>10} {'p10':>12} {'95% interval of p10':>26} {'median':>12} "
          f"{'n':>5} {'checked':>7} {'share/GB/s':>10}")
    for r in records:
        extra = f"{r['share'] * 100:.1f}%" if "share" in r else (f"{r['gbps']:.2f}" if r.get("gbps") else "")
        print(f"{r['kernel']:<16} {r['phase']:<18} {r['size']:>10} {r['model_s'] * 1e6:>10.1f}us "
              f"[{r['model_ci_low_s'] * 1e6:>10.1f}, {r['model_ci_high_s'] * 1e6:>10.1f}]us "
              f"{r['median_s'] * 1e6:>10.1f}us {r['samples']:>5} {str(r['checked']).lower():>7} {extra:>10}")
        found = r.get("modes") or []
        if len(found) > 1:
            parts = ", ".join(f"{m['median_s'] * 1e6:.1f}us x{100 * m['share']:.0f}%" for m in found)
            print(f"{'':<16} {len(found)} modes: {parts} (p90/p10 {r.get('spread', float('nan')):.2f}): "
                  "the median mixes fast and slowed runs")


def print_repeats(rows: list[dict]) -> None:
    """The run-to-run table of ``measure --repeat``: each block's modelling figure and median, and their spreads."""
    print(f"{'kernel':<16} {'phase':<18} {'size':>10} {'blocks':>6} {'p10 spread':>10} {'median spread':>13}  "
          "p10 per block (us)")
    for r in rows:
        per = " ".join(f"{x * 1e6:.1f}" for x in r["model_s"])
        print(f"{r['kernel']:<16} {r['phase']:<18} {r['size']:>10} {r['blocks']:>6} {r['model_spread']:>10.3f} "
              f"{r['median_spread']:>13.3f}  {per}")


def print_extrapolation(records: list[dict]) -> None:
    """Each target's prediction, its phases and baselines, the measured time where checked, then the warnings."""
    for r in records:
        lo, hi = r["interval_s"]
        line = (f"size {r['size']}: predicted {r['predicted_s'] * 1e3:.4g} ms [{lo * 1e3:.4g}, {hi * 1e3:.4g}] "
                f"({r['model']}); pure fractal {r['fractal_s'] * 1e3:.4g} ms")
        if "measured_s" in r:
            line += f"; measured {r['measured_s'] * 1e3:.4g} ms, error {r['error'] * 100:+.1f}%"
        print(line)
        for ph in r["phases"]:
            print(f"  {ph['name']:<18} m={ph['m']:.3f} d={ph['d']:.3f} R2={ph['r2']:.4f} "
                  f"-> {ph['predicted_s'] * 1e3:.4g} ms ({ph['model']})")
        base = ", ".join(f"{k} {v * 1e3:.4g} ms" for k, v in r["baselines_s"].items() if v is not None)
        print(f"  baselines on the whole run: {base}")
    for w in dict.fromkeys(w for r in records for w in r.get("warnings", [])):
        print(f"warning: {w}")


def _us(s: float) -> str:
    return f"{s * 1e6:.4g} us"


def render_pipeline(r: dict[str, Any], explain: bool = False, trace: bool = False) -> str:
    """The pipeline model's report of one launch."""
    occ, sim, hw = r["occupancy"], r["simulation"], r["hardware"]
    g, b = r["grid"], r["block"]
    lines = [
        f"pipeline model: {r['kernel']} on {r['arch']}, grid {g[0]}x{g[1]}x{g[2]}, block {b[0]}x{b[1]}x{b[2]} "
        f"({r['threads']} threads); PTX: {r['ptx_source']}",
        f"predicted {_us(r['predicted_s'])} = compute {_us(r['compute_s'])} ({r['cycles']:.0f} cycles of the busiest "
        f"SM at {r['clock_hz'] / 1e9:.3g} GHz) + launch {_us(r['launch_s'])} + memory penalty {_us(r['penalty_s'])}",
    ]
    if "interval_s" in r:
        lo, hi = r["interval_s"]
        lines.append(f"interval [{_us(lo)}, {_us(hi)}]: {r.get('interval_method', '')}".rstrip(": "))
    if "corrected_s" in r:
        c = r["correction"]
        lines.append(f"corrected {_us(r['corrected_s'])} by the learned correction in {c['file']} (fitted on "
                     f"{c['cases']} cases of {len(c['fitted_on'])} kernels)")
    lines.append(f"occupancy: {occ['blocks_per_sm']} blocks/SM ({occ['warps_per_sm']} warps), limited by "
                 f"{occ['limited_by']}; {occ['regs_per_thread']} registers/thread ({occ['registers_source']}), "
                 f"{occ['smem_per_block']} B shared/block; {occ['blocks_on_busiest_sm']} blocks on the busiest of "
                 f"{hw['sms']} SMs = {occ['waves']:.3g} waves")
    rate = sim.get("rate_warp_instructions_per_s")
    lines.append(f"simulation: {sim['method']}; {sim['warp_instructions_simulated']} warp-instructions in "
                 f"{sim['seconds']:.3g} s" + (f" ({rate:.3g}/s)" if rate else ""))
    lines.append(f"uncoalesced global requests per warp: {r['uncoalesced']:.4g} "
                 f"({r['uncoalesced_requests_total']:.4g} in the launch)")
    for a in r["accesses"]:
        if a["space"] != "global":
            continue
        extra = f", stride {a['stride_bytes']} B" if "stride_bytes" in a else ""
        lines.append(f"  line {a['line']:>4} {a['opcode']:<16} {a['pattern']}{extra}: {a['transactions']:.3g} sectors "
                     f"per request (coalesced {a['ideal']:.3g}), x{a['executions_per_warp']:.4g} per warp")
    units = sorted(r["units"].items(), key=lambda kv: -kv[1]["utilization"])
    lines.append("units: " + ", ".join(f"{k} {v['instructions']} instr {v['utilization'] * 100:.3g}%" for k, v in units))
    lat = r["latencies"]
    lines.append(f"latencies from the profile: {', '.join(lat['from_profile']) or 'none'}; "
                 f"defaults ({r['arch']}): {', '.join(lat['defaults']) or 'none'}")
    if explain:
        lines.append("hardware:")
        for key in ("sms", "clock_hz", "read_Bps", "write_Bps", "load_latency_cycles", "store_latency_cycles"):
            skey = {"load_latency_cycles": "load_latency", "store_latency_cycles": "store_latency"}.get(key, key)
            lines.append(f"  {key:<22} {hw[key]:<14.6g} {hw['sources'].get(skey, '')}")
        lines.append(f"  {'launch_fixed_s':<22} {r['launch_s']:<14.6g} "
                     f"{r.get('traffic', {}).get('launch_source', '')}")
        lines.append(f"  {'dispatch_s':<22} {r.get('dispatch_s', 0.0):<14.6g} (overlaps the work)")
        lines.append("latencies used (cycles, source):")
        for u in lat["used"]:
            lines.append(f"  {u['opcode']:<22} {u['unit']:<8} {u['cycles']:<8g} {u['source']}")
        lines.append(f"path ({r['path']['active_fraction'] * 100:.3g}% of the sampled threads follow it all the way): "
                     + " -> ".join(r["path"]["blocks"]))
        for br in r["path"]["branches"]:
            tf = br["taken_fraction"]
            lines.append(f"  branch line {br['line']}: " + ("not known statically" if tf is None else
                         f"taken by {tf * 100:.3g}% of active threads, divergent in {br['divergent_warps'] * 100:.3g}% "
                         "of warps"))
        for lp in r["loops"]:
            desc = ""
            if "induction" in lp:
                desc = (f"; induction {lp['induction']} from {lp.get('start')} step {lp.get('step')} while "
                        f"{lp.get('stay_while')} (bound {lp.get('bound')}), test at line {lp.get('test_line')}")
            lines.append(f"  loop {lp['label']} (line {lp['line']}): {lp['trip']} passes ({lp['trip_source']}){desc}")
        lines.append(f"task list: {r['task_list']['length']} tasks per warp from {r['task_list']['static_instructions']} "
                     f"PTX instructions; " + ", ".join(f"{k} {v}" for k, v in r["task_list"]["unit_counts"].items()))
        for a in r["accesses"]:
            if a["space"] == "global":
                continue
            lines.append(f"  line {a['line']:>4} {a['opcode']:<16} {a['space']} bank conflict "
                         f"{a.get('bank_conflict', 1):.3g}-way, x{a['executions_per_warp']:.4g} per warp")
    if trace and "trace" in r:
        lines.append("task list of warp 0 (id, unit, latency, writes <- reads, block):")
        for tk in r.get("tasks", [])[:200]:
            lines.append(f"  {tk['id']:>5} {tk['unit']:<7} {tk['latency']:>5}  {','.join(tk['writes']) or '-'} <- "
                         f"{','.join(tk['reads']) or '-'}  (block {tk['block']})")
        lines.append("warp 0: issue / execute / write back (cycles):")
        for ev in r["trace"][:200]:
            lines.append(f"  task {ev['task']:>5} line {ev['line']:>4} {ev['opcode']:<20} {ev['issue']:>8} "
                         f"{ev['execute']:>8} {ev['write_back']:>8}")
    for w in r["warnings"]:
        lines.append(f"warning: {w}")
    return "\n".join(lines)
