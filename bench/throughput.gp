# Output tokens/s of the throughput scenario against batch size (log2 axis), one line per variant.
# Variables: datadir, outdir, variants, plottitle.
set terminal pngcairo size 1000,600 enhanced font 'sans,10'
set output outdir.'/throughput.png'
set title "throughput: output tokens/s vs batch\n".plottitle noenhanced
set grid
set key top left
set logscale x 2
set xlabel 'batch (sequences decoded together)'
set ylabel 'output tokens/s'
set format y '%.0f'
set yrange [0:*]
plot for [v in variants] datadir.'/throughput_'.v.'.dat' using 1:2 with linespoints lw 2 pt 7 title v noenhanced
