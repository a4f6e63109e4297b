//! How much of the machine other processes leave a rank at its start, for `threads "auto"`:
//! the idle cores of `/proc/stat`, plus the CPU time of processes that give way to this one
//! (a nice value at least [`GIVES_WAY`] above its own, by the kernel's autogroup rule where that
//! is on).
//! A niced background job is busy but takes almost nothing from a rank that wants its core:
//! counting it as held picked one thread where two were 1.3x faster (docs/performance.md,
//! "7. Threads").

use std::time::Duration;

/// A task whose (group's) nice value is this much above ours gets at most a tenth of our CPU
/// share under CFS (weight 1024 at nice 0, 110 at nice 10): it gives way.
pub(crate) const GIVES_WAY: i64 = 10;

/// Where a task stands with the scheduler: its nice value and, where the kernel groups tasks by
/// session (`/proc/sys/kernel/sched_autogroup_enabled`), its autogroup's id and nice value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Standing {
    pub nice: i64,
    pub autogroup: Option<(u64, i64)>,
}

/// Whether `other` gives way to `me`. With autogroups, CPU time is shared between groups by
/// the groups' nice values, and by the tasks' own only within a group; without, by the tasks'.
pub(crate) fn gives_way(other: Standing, me: Standing) -> bool {
    match (other.autogroup, me.autogroup) {
        (Some((group, _)), Some((mine, _))) if group == mine => other.nice - me.nice >= GIVES_WAY,
        (Some((_, group_nice)), Some((_, my_group_nice))) => {
            group_nice - my_group_nice >= GIVES_WAY
        }
        _ => other.nice - me.nice >= GIVES_WAY,
    }
}

/// `/proc/<pid>/stat`'s CPU time (user + system, in clock ticks) and nice value: the fields
/// after the command's closing parenthesis, which itself may hold spaces or parentheses.
pub(crate) fn parse_stat(stat: &str) -> Option<(u64, i64)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // Field 3 (state) is fields[0]: utime is field 14, stime 15, nice 19.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    let nice: i64 = fields.get(16)?.parse().ok()?;
    Some((utime + stime, nice))
}

/// `/proc/<pid>/autogroup`, e.g. `/autogroup-115 nice 19`: the group's id and nice value.
pub(crate) fn parse_autogroup(text: &str) -> Option<(u64, i64)> {
    let mut words = text.split_whitespace();
    let id = words.next()?.strip_prefix("/autogroup-")?.parse().ok()?;
    (words.next()? == "nice").then_some(())?;
    Some((id, words.next()?.parse().ok()?))
}

/// How many cores' worth of the machine sat idle over `window`, or were used by processes that
/// give way to this one (`None` where /proc cannot be read).
pub(crate) fn available_cores(window: Duration) -> Option<f64> {
    let autogroups = autogroups_on();
    let (idle0, total0, cpus) = machine_ticks()?;
    let before = task_ticks();
    std::thread::sleep(window);
    let (idle1, total1, _) = machine_ticks()?;
    let after = task_ticks();
    let total = total1.checked_sub(total0).filter(|t| *t > 0)?;
    let my_pid = std::process::id();
    let me = standing(my_pid, after.get(&my_pid)?.1, autogroups);
    let yielded: u64 = after
        .iter()
        .filter_map(|(&pid, &(ticks, nice))| {
            let used = ticks.checked_sub(before.get(&pid)?.0).filter(|t| *t > 0)?;
            gives_way(standing(pid, nice, autogroups), me).then_some(used)
        })
        .sum();
    let free = idle1.saturating_sub(idle0) + yielded;
    Some((free as f64 / total as f64 * cpus as f64).min(cpus as f64))
}

/// `/proc/stat`'s idle + iowait ticks, all ticks, and the number of CPUs.
fn machine_ticks() -> Option<(u64, u64, usize)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let cpus = stat
        .lines()
        .filter(|l| l.starts_with("cpu") && !l.starts_with("cpu "))
        .count();
    let fields: Vec<u64> = stat
        .lines()
        .next()?
        .split_whitespace()
        .skip(1)
        .take(8)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal
    let idle = fields.get(3)? + fields.get(4)?;
    Some((idle, fields.iter().sum(), cpus))
}

/// Every readable process's CPU ticks and nice value, by pid.
fn task_ticks() -> std::collections::HashMap<u32, (u64, i64)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Default::default();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            Some((pid, parse_stat(&stat)?))
        })
        .collect()
}

/// Whether the kernel groups tasks by session for scheduling.
fn autogroups_on() -> bool {
    std::fs::read_to_string("/proc/sys/kernel/sched_autogroup_enabled")
        .is_ok_and(|on| on.trim() == "1")
}

/// A process's [`Standing`] from its nice value; its autogroup only where `autogroups` are on
/// and /proc says it.
fn standing(pid: u32, nice: i64, autogroups: bool) -> Standing {
    let autogroup = autogroups
        .then(|| std::fs::read_to_string(format!("/proc/{pid}/autogroup")).ok())
        .flatten()
        .and_then(|text| parse_autogroup(&text));
    Standing { nice, autogroup }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ME: Standing = Standing {
        nice: 0,
        autogroup: Some((7, 0)),
    };

    #[test]
    fn a_task_gives_way_by_its_own_nice_in_our_group_and_by_its_groups_elsewhere() {
        let task = |nice, autogroup| Standing { nice, autogroup };
        assert!(gives_way(task(19, Some((7, 0))), ME));
        assert!(gives_way(task(10, Some((7, 0))), ME));
        assert!(!gives_way(task(9, Some((7, 0))), ME));
        // Another session's group at nice 0: its niced task still takes a full share.
        assert!(!gives_way(task(19, Some((8, 0))), ME));
        assert!(gives_way(task(0, Some((8, 19))), ME));
        // Autogroups off (or unreadable): the tasks' own nice values.
        assert!(gives_way(task(19, None), task(0, None)));
        assert!(!gives_way(task(0, None), task(0, None)));
        assert!(gives_way(task(5, None), task(-5, None)), "ten apart");
    }

    #[test]
    fn this_machines_proc_gives_a_share_of_its_cores() {
        let (_, _, cpus) = machine_ticks().unwrap();
        let cpus = cpus as f64;
        let available = available_cores(Duration::from_millis(200)).unwrap();
        assert!((0.0..=cpus).contains(&available), "{available} of {cpus}");
        let pid = std::process::id();
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let (_, nice) = parse_stat(&stat).unwrap();
        let me = standing(pid, nice, autogroups_on());
        assert!(!gives_way(me, me), "a process does not give way to itself");
    }

    #[test]
    fn proc_stat_and_autogroup_lines_parse_as_the_kernel_writes_them() {
        let stat = "1234 (tandem (worker) x) R 1 2 3 4 5 6 7 8 9 10 150 25 0 0 20 19 3 0 99";
        assert_eq!(parse_stat(stat), Some((175, 19)));
        assert_eq!(parse_stat("1 (short) S 1 2"), None);
        assert_eq!(parse_autogroup("/autogroup-115 nice 19\n"), Some((115, 19)));
        assert_eq!(parse_autogroup("/autogroup-3 nice -5"), Some((3, -5)));
        assert_eq!(parse_autogroup("something else"), None);
    }
}
