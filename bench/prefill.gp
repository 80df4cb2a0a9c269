# Prefill: achieved TFLOP/s (left axis) and tokens/s (right axis) against prompt length.
# Variables: datadir, outdir, variants, plottitle.
set terminal pngcairo size 1000,600 enhanced font 'sans,10'
set output outdir.'/prefill.png'
set title "prefill: achieved TFLOP/s (solid) and tokens/s (dashed) vs prompt length\n".plottitle noenhanced
set grid
set key top left
set logscale x 2
set xlabel 'prompt tokens'
set ylabel 'TFLOP/s (FLOPs counted from the model)'
set y2label 'tokens/s'
# From zero on both axes: a flat curve must look flat, not like a cliff on a zoomed axis.
set yrange [0:*]
set y2range [0:*]
set ytics nomirror
set y2tics
set format y2 '%.0f'
n = words(variants)
plot for [i=1:n] datadir.'/prefill_'.word(variants, i).'.dat' using 1:2 with linespoints lw 2 pt 7 lc i \
         title word(variants, i).' TFLOP/s' noenhanced, \
     for [i=1:n] datadir.'/prefill_'.word(variants, i).'.dat' using 1:3 axes x1y2 with linespoints dt 2 pt 6 lc i \
         title word(variants, i).' tok/s' noenhanced
