# plot.gp - weight GB/s against matrix size for each kernel configuration
# of `rontolisp bench', with the read bandwidth the probe measured.
# `make bench' runs it as
#   gnuplot -e "data='build/bench.dat'; vars='build/bench-vars.gp'; out='build/bench.png'" tools/bench/plot.gp
load vars
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo size 960,600 font ",10"
} else {
    if (strstrt(GPVAL_TERMINALS, " png ") > 0) {
        set terminal png size 960,600
    } else {
        set terminal svg size 960,600
    }
}
set output out
set termoption noenhanced
set title sprintf("rontolisp bench: y = W x, weight bytes streamed per second (%s)", machine)
set xlabel "matrix size (weights, rows x cols)"
set ylabel "weight GB/s"
set logscale x
set autoscale xfix
set offsets graph 0.04, graph 0.12, 0, 0
set logscale y
set grid
set key outside right top
set xtics rotate by -30
plot for [i=0:nblocks-1] data index i using 1:2 with linespoints lw 2 pt 7 title columnheader(1), \
     data index 0 using 1:(NaN):xtic(3) notitle, \
     probe1 with lines dt 2 lw 2 lc rgb "black" title "read probe, 1 thread", \
     probeN with lines dt 3 lw 2 lc rgb "gray40" title sprintf("read probe, %d threads", nthreads)
