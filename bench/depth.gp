# Decode tokens/s at each KV depth, one line per variant. Variables: datadir, outdir, variants, plottitle.
set terminal pngcairo size 1000,600 enhanced font 'sans,10'
set output outdir.'/depth.png'
set title "decode tokens/s vs KV depth (batch 1)\n".plottitle noenhanced
set grid
set key top right
set xlabel 'KV depth (tokens in the cache before decoding)'
set ylabel 'decode tokens/s'
set yrange [0:*]
plot for [v in variants] datadir.'/depth_'.v.'.dat' using 1:2 with linespoints lw 2 pt 7 title v noenhanced
