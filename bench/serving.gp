# Serving scenario: cumulative distributions of TTFT, TPOT, E2E (over requests) and ITL (over token
# gaps), one panel each (serving.png). Variables: datadir, outdir, variants, plottitle.
set terminal pngcairo size 1200,800 enhanced font 'sans,10'
set output outdir.'/serving.png'
set multiplot layout 2,2 title "serving: latency distributions\n".plottitle noenhanced
set grid
set key bottom right
set yrange [0:1.02]
set ylabel 'share at or below'
n = words(variants)
do for [m in "ttft tpot itl e2e"] {
  set title (m eq "ttft" ? "time to first token" : m eq "tpot" ? "time per output token" : \
             m eq "itl" ? "inter-token latency" : "end-to-end latency")
  set xlabel m.' (ms)'
  plot for [i=1:n] datadir.'/serv'.m.'_'.word(variants, i).'.dat' using 1:2 with steps lw 2 lc i \
       title word(variants, i) noenhanced
}
unset multiplot
