#!/usr/bin/env bash
# Lists the affected users a study's runs restored after the bound (detection + one probe interval), with their
# time to restore, so that a restored_at_bound below 1 can be read: which users, how late, MT or MO.
#
#   scripts/study-late-users.sh docs/results/study-published scscf-kill quasi-pool
#
# Prints one line per late user (run, user, bound, restore, MT restore, MO restore, in seconds from the fault),
# then the count of late users over the users of the runs with a survival curve, and the range of their
# restoration times.
set -euo pipefail
dir=${1:?usage: study-late-users.sh <study dir> <experiment> <scheme>}
exp=${2:?usage: study-late-users.sh <study dir> <experiment> <scheme>}
scheme=${3:?usage: study-late-users.sh <study dir> <experiment> <scheme>}
printf 'run\tuser\tbound_s\trestore_s\tmt_restore_s\tmo_restore_s\n'
for run in "$dir/$exp/$scheme"/rep*; do
	bound=$(jq -r '.survival.bound_s // empty' "$run/summary.json")
	[ -n "$bound" ] || continue
	awk -F, -v run="$(basename "$run")" -v bound="$bound" '
		NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
		{ n++; r = $col["restore_s"] }
		r == "" || r + 0 > bound + 0 {
			printf "%s\t%s\t%.2f\t%s\t%s\t%s\n", run, $col["impu"], bound, r, $col["mt_restore_s"], $col["mo_restore_s"]
		}
		END { printf "#users\t%d\n", n }' "$run/users.csv"
done | awk -F'\t' '
	/^#users/ { users += $2; next }
	NR == 1 { print; next }
	{ print; late++; if ($4 != "") { if (min == "" || $4 + 0 < min) min = $4 + 0; if ($4 + 0 > max) max = $4 + 0 } }
	END { printf "# %d of %d users restored after the bound; their time to restore %s–%s s\n", late, users, min, max }'
