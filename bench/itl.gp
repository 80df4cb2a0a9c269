# Inter-token latency of the latency scenario: histogram (itl.png) and cumulative distribution with
# p50/p90/p99 marked (itl_cdf.png). Variables: datadir, outdir, variants, plottitle, binwidth.
set terminal pngcairo size 1000,600 enhanced font 'sans,10'
set grid
set key top right

set output outdir.'/itl.png'
set title "inter-token latency distribution\n".plottitle noenhanced
set xlabel 'inter-token latency (ms)'
set ylabel 'share of decode steps'
set style fill transparent solid 0.45 noborder
set boxwidth binwidth * 0.9 absolute
plot for [v in variants] datadir.'/itlhist_'.v.'.dat' using 1:2 with boxes title v noenhanced

set output outdir.'/itl_cdf.png'
set title "inter-token latency, cumulative (points: p50, p90, p99)\n".plottitle noenhanced
set ylabel 'share of decode steps at or below'
set yrange [0:1.02]
set key bottom right
n = words(variants)
plot for [i=1:n] datadir.'/itlcdf_'.word(variants, i).'.dat' using 1:2 with steps lw 2 lc i title word(variants, i) noenhanced, \
     for [i=1:n] datadir.'/itlpct_'.word(variants, i).'.dat' using 1:2 with points pt 7 ps 1.3 lc i notitle
