# Stability: every decode step of the first timed repetition (batch-1 ITL, and the whole-batch step at
# each batch size), each over its median so the series share one axis (1 = the median step).
# Variables: datadir, outdir, variants (series titles; file i is stab_i.dat), plottitle.
set terminal pngcairo size 1000,600 enhanced font 'sans,10'
set output outdir.'/stability.png'
set title "stability: decode step time over its median, first timed repetition\n".plottitle noenhanced
set grid
set key top right
set xlabel 'decode step (at batch 1: output token) index'
set ylabel 'step time / median step time'
n = words(variants)
plot for [i=1:n] datadir.'/stab_'.i.'.dat' using 1:2 with lines lw 1 lc i title word(variants, i) noenhanced
