"""Prints the table of scripts/bench-speed.sh from its JSON lines: medians over the rounds of
each workload's figures, its same-run baselines and ratios, and after / before when both ran."""
import json
import statistics
import sys

runs = [json.loads(line) for line in open(sys.argv[1])]
# The bare-TCP group-commit floor (`strata-loadtest tcp-bound`), one per round: not a workload
# against a server, so it is printed with the goals only.
floors = {r["round"]: r["report"] for r in runs if r["row"] == "tcp_bound"}
runs = [r for r in runs if r["row"] != "tcp_bound"]


def figures(report):
    return report["produce"] or report["fetch"]


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else float("nan")


rows = sorted({r["row"] for r in runs})
servers = sorted({r["server"] for r in runs})
print(f"{'workload':<26} {'server':<7} {'req/s':>9} {'rec/s':>10} {'MiB/s':>8} {'mean ms':>8} "
      f"{'p99 ms':>8} {'p99.9':>8} {'base p99':>8} {'ratios (median)'}")
for row in rows:
    for server in servers:
        mine = [r for r in runs if r["row"] == row and r["server"] == server]
        if not mine:
            continue
        f = [figures(r["report"]) for r in mine]
        base = [r["report"]["baselines"]["null_server"]["latency_ms"]["p99"]
                if r["report"].get("baselines") else None for r in mine]
        ratio_names = sorted({x["name"] for r in mine for x in r["report"]["ratios"]})
        ratios = ", ".join(
            f"{name}={median([next((x['value'] for x in r['report']['ratios'] if x['name'] == name), None) for r in mine]):.3f}"
            for name in ratio_names)
        passed = all(r["report"]["verification"]["passed"] for r in mine)
        print(f"{row:<26} {server:<7} {median([x['requests_per_s'] for x in f]):>9.0f} "
              f"{median([x['records_per_s'] for x in f]):>10.0f} {median([x['mib_per_s'] for x in f]):>8.1f} "
              f"{median([x['latency_ms']['mean'] for x in f]):>8.3f} {median([x['latency_ms']['p99'] for x in f]):>8.3f} "
              f"{median([x['latency_ms']['p999'] for x in f]):>8.3f} {median(base):>8.3f} {ratios}"
              f"{'' if passed else '  VERIFICATION FAILED'}")
    if len(servers) == 2:
        after = median([figures(r["report"])["records_per_s"] for r in runs if r["row"] == row and r["server"] == "after"])
        before = median([figures(r["report"])["records_per_s"] for r in runs if r["row"] == row and r["server"] == "before"])
        print(f"{'':<26} after/before records/s = {after / before:.3f}")


def goals(server):
    """Issue 15's ratios per round, each against baselines of the same round."""
    def pick(row, rnd):
        return next((r["report"] for r in runs
                     if r["row"] == row and r["server"] == server and r.get("round") == rnd), None)

    def lat(x, q):
        return x["latency_ms"][q]

    lines = []
    for rnd in sorted({r.get("round") for r in runs if r["server"] == server and r.get("round")}):
        out = []
        small, leader = pick("all_1x100B", rnd), pick("leader_1x100B", rnd)
        if small and leader:
            out.append(f"leader/all {leader['produce']['requests_per_s'] / small['produce']['requests_per_s']:.2f}")
            if small.get("baselines"):
                # A leader request cannot beat the no-storage round trip: its ceiling.
                null = small["baselines"]["null_server"]["requests_per_s"]
                out.append(f"(ceiling null/all {null / small['produce']['requests_per_s']:.2f},"
                           f" leader/null {leader['produce']['requests_per_s'] / null:.2f})")
        big = pick("all_1000x1KiB", rnd)
        line = big["baselines"]["disk"]["mib_per_s"] if big and big.get("baselines") else None
        if big and line:
            out.append(f"1MiB/disk {big['produce']['mib_per_s'] / line:.3f}")
        opened = pick("open_1x100B_at_1000", rnd)
        if opened and opened.get("baselines"):
            null = lat(opened["baselines"]["null_server"], "p99")
            out.append(f"open p99/null p99 {lat(opened['produce'], 'p99') / null:.2f}")
            if opened["baselines"].get("durable_server"):
                out.append(f"durable p99/null p99 {lat(opened['baselines']['durable_server'], 'p99') / null:.2f}")
        for row, name in (("group_commit_8x100x1KiB", "8x100KiB"),
                          ("group_commit_8x100x1KiB_leader", "8x100KiB leader")):
            group = pick(row, rnd)
            if group and line:
                out.append(f"{name}/1MiB line {group['produce']['mib_per_s'] / line:.3f}")
            bound = (group.get("baselines") or {}).get("group_server") if group else None
            if bound and line:
                out.append(f"group-commit server/1MiB line {bound['mib_per_s'] / line:.3f}")
                out.append(f"{name}/group-commit server {group['produce']['mib_per_s'] / bound['mib_per_s']:.3f}")
        floor = floors.get(rnd)
        if floor:
            out.append(f"bare-TCP group commit/its own line {floor['ratio_to_line']:.3f}")
            group = pick("group_commit_8x100x1KiB", rnd)
            if group:
                tcp = floor["group_commit"]["mib_per_s"]
                out.append(f"8x100KiB/bare TCP {group['produce']['mib_per_s'] / tcp:.3f}")
                bound = (group.get("baselines") or {}).get("group_server")
                if bound:
                    out.append(f"group-commit server/bare TCP {bound['mib_per_s'] / tcp:.3f}")
        if out:
            lines.append(f"  {server} round {rnd}: " + ", ".join(out))
    return lines


for server in servers:
    for line in goals(server):
        print(line)
loads = [float(r["load"]) for r in runs]
print(f"load average (1 min) during the runs: median {statistics.median(loads):.2f}, max {max(loads):.2f}")
