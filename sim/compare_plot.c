/* compare_plot.c - the SVG of `shardsim compare --plot`, written by hand
 * (no plotting dependency). Each panel: x = the step's segments in order
 * (forward of each unit, backward of each unit, optimizer, loss), equal
 * widths; y = bytes; stacked areas = device memory per category at the end
 * of each segment (compare: what the framework's GPU run holds, the GPU
 * ledger of device.h; train: what the process holds); a black line = the highest total inside the segment;
 * a dashed red line = the device memory, when within the panel's scale
 * (above it, a note at the panel's top right says so).
 * All panels share one y scale, so stages compare by eye.
 */
#include "compare_plot.h"

#include <stdio.h>
#include <string.h>

#include "shardsim/durable.h"
#include "shardsim/units.h"

static const char *const colors[SHS_MEM_NUM_CATEGORIES] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                                           "#b07aa1"};

static void esc(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else fputc(*s, f);
    }
}

/* The highest total inside segment s of the row's ledger. */
static double seg_peak(const sim_plot_row_t *row, int s) {
    const shs_step_segment_t *g = &row->rank->segments[s];
    return (double)(row->gpu_ledger ? g->gpu_peak_total : g->peak_total);
}

int sim_compare_plot(const char *path, const char *title, const sim_plot_row_t *rows, int nrows) {
    shs_afile_t af;
    if (shs_afile_open(&af, path, "w") != SHS_OK) return -1;
    FILE *f = af.fp;
    const int cols = nrows > 1 ? 2 : 1, pw = 560, ph = 220, ml = 70, mt = 30, top = 50;
    int prow = (nrows + cols - 1) / cols, max_segments = 1;
    double ymax = 1;
    for (int i = 0; i < nrows; i++) {
        if (rows[i].rank->num_segments > max_segments) max_segments = rows[i].rank->num_segments;
        for (int s = 0; s < rows[i].rank->num_segments; s++)
            if ((double)seg_peak(&rows[i], s) > ymax) ymax = (double)seg_peak(&rows[i], s);
    }
    /* each segment is named under the axis when there is room (>= 10 px) */
    const int unit_labels = (double)pw / max_segments >= 10.0, mb = unit_labels ? 96 : 40;
    /* at least as wide as the title and legend (about 800 px) */
    int W = cols * (pw + ml + 20) + 20, H = top + prow * (ph + mt + mb) + 40;
    if (W < 820) W = 820;
    ymax *= 1.05;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" "
               "font-size=\"11\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", W, H);
    fprintf(f, "<text x=\"20\" y=\"22\" font-size=\"15\">Device memory of one rank over one training step: ");
    esc(f, title);
    fprintf(f, "</text>\n");
    for (int c = 0; c < SHS_MEM_NUM_CATEGORIES; c++)
        fprintf(f, "<rect x=\"%d\" y=\"32\" width=\"10\" height=\"10\" fill=\"%s\"/><text x=\"%d\" y=\"41\">%s</text>\n",
                20 + c * 100, colors[c], 34 + c * 100, shs_mem_category_name((shs_mem_category_t)c));
    fprintf(f, "<line x1=\"620\" y1=\"37\" x2=\"640\" y2=\"37\" stroke=\"black\"/><text x=\"644\" y=\"41\">peak inside "
               "segment</text>\n");
    for (int i = 0; i < nrows; i++) {
        const shs_meta_rank_result_t *r = rows[i].rank;
        int x0 = 20 + (i % cols) * (pw + ml + 20) + ml, y0 = top + (i / cols) * (ph + mt + mb) + mt;
        int n = r->num_segments > 0 ? r->num_segments : 1;
        double dx = (double)pw / n;
#define Y(v) (y0 + ph - (double)(v) / ymax * ph)
        fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"13\" font-weight=\"bold\">", x0, y0 - 8);
        esc(f, rows[i].name);
        fprintf(f, "</text>\n<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#999\"/>\n", x0, y0,
                pw, ph);
        for (int t = 0; t <= 4; t++) {
            char b[32];
            double v = ymax * t / 4;
            fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", x0 - 4, Y(v) + 4,
                    shs_format_bytes(b, sizeof b, v));
        }
        /* stacked areas: one rectangle per segment and category */
        for (int s = 0; s < r->num_segments; s++) {
            const shs_step_segment_t *g = &r->segments[s];
            double base = 0;
            for (int c = 0; c < SHS_MEM_NUM_CATEGORIES; c++) {
                double v = (double)(rows[i].gpu_ledger ? g->gpu_mem_end[c] : g->mem_end[c]);
                if (v > 0)
                    fprintf(f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\"><title>%s: %s "
                               "%.4g GiB</title></rect>\n",
                            x0 + s * dx, Y(base + v), dx, Y(base) - Y(base + v), colors[c], g->label,
                            shs_mem_category_name((shs_mem_category_t)c), v / 1073741824.0);
                base += v;
            }
        }
        fprintf(f, "<polyline fill=\"none\" stroke=\"black\" stroke-width=\"1.2\" points=\"");
        for (int s = 0; s < r->num_segments; s++)
            fprintf(f, "%.2f,%.2f %.2f,%.2f ", x0 + s * dx, Y(seg_peak(&rows[i], s)), x0 + (s + 1) * dx,
                    Y(seg_peak(&rows[i], s)));
        fprintf(f, "\"/>\n");
        if ((double)rows[i].device_mem < ymax) {
            fprintf(f, "<line x1=\"%d\" y1=\"%.2f\" x2=\"%d\" y2=\"%.2f\" stroke=\"red\" stroke-dasharray=\"5,3\"/>"
                       "<text x=\"%d\" y=\"%.2f\" fill=\"red\" text-anchor=\"end\">device memory</text>\n",
                    x0, Y(rows[i].device_mem), x0 + pw, Y(rows[i].device_mem), x0 + pw - 2, Y(rows[i].device_mem) - 3);
        } else if (rows[i].device_mem > 0) { /* off the scale: say so rather than draw nothing */
            char dm[32];
            fprintf(f, "<text x=\"%d\" y=\"%d\" fill=\"#a00\" text-anchor=\"end\">device memory %s: above the scale</text>\n",
                    x0 + pw, y0 - 8, shs_format_bytes(dm, sizeof dm, (double)rows[i].device_mem));
        }
        /* phase labels: where forward, backward and the optimizer begin */
        shs_step_seg_kind_t last = (shs_step_seg_kind_t)-1;
        for (int s = 0; s < r->num_segments; s++) {
            shs_step_seg_kind_t k = r->segments[s].kind;
            if (k == last) continue;
            last = k;
            const char *name = k == SHS_STEP_SEG_FORWARD ? "forward" : k == SHS_STEP_SEG_BACKWARD ? "backward"
                             : k == SHS_STEP_SEG_OPTIM ? "optim" : NULL;
            if (!name) continue;
            fprintf(f, "<line x1=\"%.2f\" y1=\"%d\" x2=\"%.2f\" y2=\"%d\" stroke=\"#666\" stroke-dasharray=\"2,2\"/>"
                       "<text x=\"%.2f\" y=\"%d\" fill=\"#333\">%s</text>\n",
                    x0 + s * dx, y0, x0 + s * dx, y0 + ph + 4, x0 + s * dx + 2, y0 + ph + 16, name);
        }
        if (unit_labels)
            for (int s = 0; s < r->num_segments; s++) {
                const char *lab = r->segments[s].label;
                if (!strncmp(lab, "fwd ", 4) || !strncmp(lab, "bwd ", 4)) lab += 4;
                double x = x0 + (s + 0.5) * dx + 3;
                fprintf(f, "<text x=\"%.2f\" y=\"%d\" font-size=\"9\" fill=\"#444\" transform=\"rotate(90 %.2f %d)\">",
                        x, y0 + ph + 22, x, y0 + ph + 22);
                esc(f, lab);
                fprintf(f, "</text>\n");
            }
        fprintf(f, "<text x=\"%d\" y=\"%d\" fill=\"#666\">unit segments of the step (%d)</text>\n", x0 + pw / 2 - 70,
                y0 + ph + mb - 8, r->num_segments);
#undef Y
    }
    fprintf(f, "</svg>\n");
    return shs_afile_commit(&af) == SHS_OK ? 0 : -1;
}
