#!/usr/bin/env python3
"""CPU time per task, by process group, between two snapshots of /proc.

    cpu.py snapshot FILE                    # before the measured run
    cpu.py report FILE TASKS GROUP=PID,...  # after it: one line per group

Groups named on the command line are those processes; `postgres` and
`rabbitmq` are every process of those users (backends come and go); `other`
is the rest of the machine's busy time (the load generator, kernel threads),
from /proc/stat; time the hypervisor gave to other machines (steal) is
reported apart, not counted. A process that exited between the snapshots counts in its
parent's group once the parent has reaped it (a PostgreSQL backend in `postgres`);
otherwise it is lost from its group and lands in `other`.
"""

import json
import os
import sys

TICK_MS = 1000.0 / os.sysconf("SC_CLK_TCK")
USERS = ("postgres", "rabbitmq")


def process_ticks():
    """{pid: [user name, utime + stime + cutime + cstime]} for every process."""
    names = {}
    with open("/etc/passwd") as passwd:
        for line in passwd:
            fields = line.split(":")
            names[fields[2]] = fields[0]
    ticks = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            uid = os.stat(f"/proc/{pid}").st_uid
        except (FileNotFoundError, ProcessLookupError):
            continue
        # Own time, plus the time of its children that exited and were
        # reaped (a PostgreSQL backend that closes mid-run hands its CPU to
        # the postmaster): else that time would land in `other`.
        ticks[pid] = [
            names.get(str(uid), str(uid)),
            int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14]),
        ]
    return ticks


def busy_ticks():
    """All CPUs' busy time since boot (user, nice, system, irq, softirq), and
    the time the hypervisor gave to others (steal)."""
    with open("/proc/stat") as stat:
        cpu = [int(v) for v in stat.readline().split()[1:]]
    return cpu[0] + cpu[1] + cpu[2] + cpu[5] + cpu[6], cpu[7]


def snapshot(path):
    with open(path, "w") as out:
        json.dump({"processes": process_ticks(), "busy": busy_ticks()}, out)


def report(path, tasks, groups):
    with open(path) as before_file:
        before = json.load(before_file)
    now = process_ticks()

    def used(pid):
        if pid not in now:
            return 0
        return now[pid][1] - before["processes"].get(pid, [None, 0])[1]

    named = {}
    for group in groups:
        name, pids = group.split("=", 1)
        named[name] = [pid for pid in pids.split(",") if pid]
    claimed = {pid for pids in named.values() for pid in pids}
    for user in USERS:
        named[user] = [pid for pid, (owner, _) in now.items() if owner == user and pid not in claimed]
    per_group = {name: sum(used(pid) for pid in pids) for name, pids in named.items()}
    busy, steal = busy_ticks()
    total = busy - before["busy"][0]
    per_group["other"] = max(0, total - sum(per_group.values()))
    per_task = lambda ticks: ticks * TICK_MS / max(tasks, 1)
    parts = ", ".join(f"{name} {per_task(ticks):.3f} ms" for name, ticks in per_group.items())
    stolen = (steal - before["busy"][1]) * TICK_MS / 1000
    print(f"cpu per task: {parts}, total {per_task(total):.3f} ms ({tasks} tasks; {stolen:.1f} s stolen by the hypervisor)")


if __name__ == "__main__":
    if sys.argv[1] == "snapshot":
        snapshot(sys.argv[2])
    else:
        report(sys.argv[2], int(float(sys.argv[3])), sys.argv[4:])
