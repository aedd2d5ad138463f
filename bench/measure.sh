# bench/measure.sh, sourced by the study scripts: measure NAME COMMAND... runs the command, keeps
# its output in NAME.log and /usr/bin/time's figures in NAME.time, and appends one line of costs
# (wall, CPU = user + sys, peak memory) to costs.txt, printing it too. A failing command prints
# its log and ends the script. It also points libtorch at OpenBLAS when it is installed (Debian's
# reference BLAS is about 20x slower), one thread (the results depend on its thread count).
if [ -d /usr/lib/x86_64-linux-gnu/openblas-pthread ]; then
  export LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
export OPENBLAS_NUM_THREADS=1

measure() {  # measure NAME COMMAND...: runs it, keeps its output in NAME.log, prints the costs
  local name=$1
  shift
  /usr/bin/time -v -o "$name.time" "$@" > "$name.log" 2>&1 || { cat "$name.log"; exit 1; }
  awk -v name="$name" -F': ' '
    /Elapsed \(wall clock\)/ { wall = $2 }
    /User time/ { user = $2 }
    /System time/ { sys = $2 }
    /Maximum resident set size/ { rss = $2 }
    END { printf "%-10s wall %s, CPU %.1f s (user %.1f + sys %.1f), peak memory %.0f MiB\n",
          name, wall, user + sys, user, sys, rss / 1024 }' "$name.time" | tee -a costs.txt
}
