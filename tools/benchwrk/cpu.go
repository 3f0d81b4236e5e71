package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// parseInfoCPU returns used_cpu_sys + used_cpu_user (seconds, as Redis
// prints them) from the text of Redis's INFO cpu. Errors: either field
// missing or not a number.
func parseInfoCPU(info string) (time.Duration, error) {
	var total float64
	var seen int
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || (k != "used_cpu_sys" && k != "used_cpu_user") {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, fmt.Errorf("INFO cpu %s: %w", k, err)
		}
		total += f
		seen++
	}
	if seen != 2 {
		return 0, fmt.Errorf("INFO cpu has no used_cpu_sys and used_cpu_user: %q", info)
	}
	return time.Duration(total * float64(time.Second)), nil
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's utime and stime:
// 100 on every Linux architecture Go supports (the kernel's ABI, proc(5)).
const clockTicks = 100

// parseProcStat returns utime + stime of a /proc/<pid>/stat line (proc(5):
// fields 14 and 15, in clock ticks, counted after the parenthesised comm,
// which may itself hold spaces and parentheses).
func parseProcStat(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("not a /proc/<pid>/stat line: %q", stat)
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state): utime is field 14 = f[11], stime f[12].
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc/<pid>/stat line: %q", stat)
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/<pid>/stat utime %q stime %q: not numbers", f[11], f[12])
	}
	return time.Duration(u+s) * time.Second / clockTicks, nil
}

// procCPU is the CPU time (user + system) process pid has used so far.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseProcStat(string(b))
}
