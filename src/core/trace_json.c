/* core/trace_json.c - the trace file: the engine lane's events as one Chrome
 * trace event JSON file (docs/api.md "Tracing and statistics"; the format
 * the strata-trace tool reads).
 *
 * Owns: the lane and process metadata, names resolved from ids (callables,
 * endpoints), the pairing of run phases and of dependency edges with the
 * tasks at their ends, JSON string escaping.
 * Must never: run while any thread still records (close calls it after every
 * child stopped), or leave a partial file unreported.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/endpoint.h"
#include "core/engine.h"
#include "core/run.h"
#include "core/trace.h"
#include "strata/strata.h"
#include "util/alloc.h"
#include "util/error.h"

enum { TID_RUNS = 1, TID_ORCH = 2, TID_SUB0 = 10, TID_NEXT0 = 1000 };

struct task_key {
    uint64_t run;
    uint32_t seq;
    uint32_t idx; /* in the lane */
};

typedef struct writer {
    FILE *f;
    strata_worker *w;
    const st_trace_event *ev;
    uint32_t n;
    struct task_key *tasks; /* the TASK events, sorted by (run, seq) */
    uint32_t ntasks;
    long pid;
    int first; /* no event written yet: no comma before the next */
    int lanes; /* thread_name entries written */
} writer;

/* The length of the well-formed UTF-8 sequence at s (RFC 3629: no overlong
 * forms, no surrogates, nothing above U+10FFFF), or 0. */
static int utf8_len(const unsigned char *s) {
    unsigned char c = s[0];
    int n;
    uint32_t cp;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        n = 2, cp = c & 0x1fu;
    else if (c >= 0xe0 && c <= 0xef)
        n = 3, cp = c & 0x0fu;
    else if (c >= 0xf0 && c <= 0xf4)
        n = 4, cp = c & 0x07u;
    else
        return 0;
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) /* also stops at the terminating NUL */
            return 0;
        cp = cp << 6 | (s[i] & 0x3fu);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

/* A JSON string: names and labels come from callers and backends, so bytes
 * that are not UTF-8 become U+FFFD (one per byte) and control characters are
 * escaped; viewers (Perfetto) refuse a file with either raw. */
static void put_str(FILE *f, const char *str) {
    const unsigned char *s = (const unsigned char *)str;
    fputc('"', f);
    while (*s) {
        unsigned char ch = *s;
        int n = utf8_len(s);
        if (n == 0) {
            fputs("\\ufffd", f);
            s++;
            continue;
        }
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20 || ch == 0x7f)
            fprintf(f, "\\u%04x", ch);
        else
            fwrite(s, 1, (size_t)n, f);
        s += n;
    }
    fputc('"', f);
}

/* Microseconds since t0 with 3 decimals: exact nanoseconds. */
static void put_us(FILE *f, uint64_t t0, uint64_t ns) {
    uint64_t d = ns > t0 ? ns - t0 : 0;
    fprintf(f, "%llu.%03llu", (unsigned long long)(d / 1000), (unsigned long long)(d % 1000));
}

static void begin_event(writer *wr) {
    fputs(wr->first ? "\n" : ",\n", wr->f);
    wr->first = 0;
}

static const char *callable_name(strata_worker *w, uint32_t id) {
    const st_callable_info *ci = st_registry_get(&w->callables, (int32_t)id);
    return ci ? ci->name : "?";
}

static int tid_of(const strata_worker *w, int32_t worker) {
    if (worker >= ST_TRACE_NEXT)
        return TID_NEXT0 + (worker - ST_TRACE_NEXT);
    if (worker < 0)
        return TID_ORCH;
    (void)w;
    return TID_SUB0 + worker;
}

/* The process a worker's task bodies ran in: a process child's own pid. */
static long pid_of(const writer *wr, int32_t worker) {
    const strata_worker *w = wr->w;
    const st_endpoint *ep = NULL;
    if (worker >= ST_TRACE_NEXT && worker - ST_TRACE_NEXT < w->nnext)
        ep = w->next[worker - ST_TRACE_NEXT].ep;
    else if (worker >= 0 && worker < w->nsubs)
        ep = w->subs[worker].ep;
    return ep && ep->pid ? (long)ep->pid : wr->pid;
}

static void put_name(writer *wr, const char *what, long pid, int tid, const char *name) {
    begin_event(wr);
    fprintf(wr->f, "{\"ph\":\"M\",\"name\":\"%s\",\"pid\":%ld,", what, pid);
    if (tid >= 0)
        fprintf(wr->f, "\"tid\":%d,", tid);
    fputs("\"args\":{\"name\":", wr->f);
    put_str(wr->f, name);
    fputs("}}", wr->f);
}

static void put_lane_name(writer *wr, long pid, int tid, const char *name) {
    put_name(wr, "thread_name", pid, tid, name);
    wr->lanes++;
}

static void put_sub_names(writer *wr) {
    char name[96];
    for (int i = 0; i < wr->w->nsubs; i++) {
        long pid = pid_of(wr, i);
        if (pid != wr->pid) {
            snprintf(name, sizeof name, "sub worker %d (process)", i);
            put_name(wr, "process_name", pid, -1, name);
        }
        snprintf(name, sizeof name, "sub %d", i);
        put_lane_name(wr, pid, TID_SUB0 + i, name);
    }
    put_lane_name(wr, wr->pid, TID_SUB0 + wr->w->nsubs, "helper");
}

/* A next-level endpoint's label reads "<id> (<name>)" (exec/worker_chip.c,
 * worker_child.c, chip_child.c): the name inside the parentheses, else the
 * label as it is. */
static const char *label_name(const char *label, char *buf, size_t cap) {
    const char *open = strchr(label, '(');
    size_t len = strlen(label);
    if (!open || len == 0 || label[len - 1] != ')')
        return label;
    snprintf(buf, cap, "%.*s", (int)(label + len - 1 - (open + 1)), open + 1);
    return buf;
}

static void put_next_names(writer *wr) {
    strata_worker *w = wr->w;
    char name[96], own[64];
    for (int j = 0; j < w->nnext; j++) {
        const char *label = label_name(w->next[j].ep ? w->next[j].ep->label : "", own, sizeof own);
        int chip = strncmp(label, "chip ", 5) == 0;
        long pid = pid_of(wr, ST_TRACE_NEXT + j);
        if (pid != wr->pid) {
            if (chip)
                snprintf(name, sizeof name, "%s (process)", label);
            else
                snprintf(name, sizeof name, "L%d child %d (process)", w->cfg.level - 1, j);
            put_name(wr, "process_name", pid, -1, name);
        }
        if (chip)
            snprintf(name, sizeof name, "%s", label);
        else
            snprintf(name, sizeof name, "next-level %d", j);
        put_lane_name(wr, pid, TID_NEXT0 + j, name);
    }
}

static void put_metadata(writer *wr) {
    char name[96];
    snprintf(name, sizeof name, "strata L%d worker", wr->w->cfg.level);
    put_name(wr, "process_name", wr->pid, -1, name);
    put_lane_name(wr, wr->pid, TID_RUNS, "runs");
    put_lane_name(wr, wr->pid, TID_ORCH, "orchestrator");
    put_sub_names(wr);
    put_next_names(wr);
}

static int cmp_task(const void *a, const void *b) {
    const struct task_key *x = a, *y = b;
    if (x->run != y->run)
        return x->run < y->run ? -1 : 1;
    if (x->seq != y->seq)
        return x->seq < y->seq ? -1 : 1;
    return x->idx < y->idx ? -1 : 1;
}

/* The first TASK event of (run, seq): a group's member 0. */
static const st_trace_event *find_task(const writer *wr, uint64_t run, uint32_t seq) {
    uint32_t lo = 0, hi = wr->ntasks;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        const struct task_key *k = &wr->tasks[mid];
        if (k->run < run || (k->run == run && k->seq < seq))
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < wr->ntasks && wr->tasks[lo].run == run && wr->tasks[lo].seq == seq)
        return &wr->ev[wr->tasks[lo].idx];
    return NULL;
}

static const char *status_name(uint8_t s) {
    return s == 0 ? "ok" : s == 2 ? "cancelled" : "failed";
}

static void put_task_args(writer *wr, const st_trace_event *e, uint32_t edge_from, uint32_t i) {
    FILE *f = wr->f;
    uint64_t t0 = wr->w->trace.t0;
    fprintf(f, "\"args\":{\"run\":%llu,\"task\":\"%llu:%u\",\"worker\":%d,\"submit_us\":",
            (unsigned long long)e->run, (unsigned long long)e->run, e->a,
            e->worker >= ST_TRACE_NEXT ? e->worker - ST_TRACE_NEXT : e->worker);
    put_us(f, t0, e->t[0]);
    fputs(",\"ready_us\":", f);
    put_us(f, t0, e->t[1]);
    fputs(",\"dispatch_us\":", f);
    put_us(f, t0, e->t[2]);
    if (e->b >> 31) /* a group's member: the members share the task id */
        fprintf(f, ",\"member\":%u", (e->b >> 16) & 0x7fffu);
    fprintf(f, ",\"measured\":%s,\"status\":\"%s\",\"deps\":[",
            e->flags & ST_TEVF_MEASURED ? "true" : "false", status_name(e->status));
    int any = 0;
    for (uint32_t k = edge_from; k < i; k++) {
        const st_trace_event *d = &wr->ev[k];
        if (d->kind != ST_TEV_EDGE || d->run != e->run || d->b != e->a)
            continue;
        fprintf(f, "%s\"%llu:%u\"", any ? "," : "", (unsigned long long)d->run, d->a);
        any = 1;
    }
    fputs("]}}", f);
}

static void put_task(writer *wr, const st_trace_event *e, uint32_t edge_from, uint32_t i) {
    FILE *f = wr->f;
    uint64_t t0 = wr->w->trace.t0;
    begin_event(wr);
    fputs("{\"ph\":\"X\",\"cat\":\"task\",\"name\":", f);
    put_str(f, callable_name(wr->w, e->b & 0xffffu));
    fprintf(f, ",\"pid\":%ld,\"tid\":%d,\"ts\":", pid_of(wr, e->worker), tid_of(wr->w, e->worker));
    put_us(f, t0, e->t[3]);
    fputs(",\"dur\":", f);
    put_us(f, e->t[3], e->ts > e->t[3] ? e->ts : e->t[3]);
    fputc(',', f);
    put_task_args(wr, e, edge_from, i);
}

static void put_not_run(writer *wr, const st_trace_event *e) {
    FILE *f = wr->f;
    char name[96];
    snprintf(name, sizeof name, "%s (not run)", callable_name(wr->w, e->b & 0xffffu));
    begin_event(wr);
    fputs("{\"ph\":\"i\",\"cat\":\"task\",\"s\":\"t\",\"name\":", f);
    put_str(f, name);
    fprintf(f, ",\"pid\":%ld,\"tid\":%d,\"ts\":", wr->pid, TID_ORCH);
    put_us(f, wr->w->trace.t0, e->ts);
    fprintf(f, ",\"args\":{\"run\":%llu,\"task\":\"%llu:%u\",\"worker\":-1,\"submit_us\":",
            (unsigned long long)e->run, (unsigned long long)e->run, e->a);
    put_us(f, wr->w->trace.t0, e->t[0]);
    fprintf(f, ",\"status\":\"%s\"}}", status_name(e->status));
}

static void put_edge(writer *wr, const st_trace_event *d, uint32_t id) {
    const st_trace_event *p = find_task(wr, d->run, d->a);
    const st_trace_event *c = find_task(wr, d->run, d->b);
    if (!p || !c)
        return; /* an end's record was dropped */
    FILE *f = wr->f;
    uint64_t t0 = wr->w->trace.t0;
    begin_event(wr);
    fprintf(
        f,
        "{\"ph\":\"s\",\"cat\":\"dep\",\"name\":\"dep\",\"id\":%u,\"pid\":%ld,\"tid\":%d,\"ts\":",
        id, pid_of(wr, p->worker), tid_of(wr->w, p->worker));
    put_us(f, t0, p->ts);
    fputc('}', f);
    begin_event(wr);
    fprintf(f,
            "{\"ph\":\"f\",\"cat\":\"dep\",\"name\":\"dep\",\"bp\":\"e\",\"id\":%u,\"pid\":%ld,"
            "\"tid\":%d,\"ts\":",
            id, pid_of(wr, c->worker), tid_of(wr->w, c->worker));
    put_us(f, t0, c->t[3]);
    fputc('}', f);
}

static void put_span_on(writer *wr, const char *cat, const char *name, long pid, int tid,
                        uint64_t from, uint64_t to) {
    FILE *f = wr->f;
    begin_event(wr);
    fprintf(f, "{\"ph\":\"X\",\"cat\":\"%s\",\"name\":", cat);
    put_str(f, name);
    fprintf(f, ",\"pid\":%ld,\"tid\":%d,\"ts\":", pid, tid);
    put_us(f, wr->w->trace.t0, from);
    fputs(",\"dur\":", f);
    put_us(f, from, to > from ? to : from);
    fputc('}', f);
}

static void put_span(writer *wr, const char *cat, const char *name, int tid, uint64_t from,
                     uint64_t to) {
    put_span_on(wr, cat, name, wr->pid, tid, from, to);
}

/* A chip task's native phases on its lane (a launch never seen: no execute). */
static void put_chip(writer *wr, const st_trace_event *e) {
    const char *c = callable_name(wr->w, e->b & 0xffffu);
    char name[96];
    int tid = tid_of(wr->w, e->worker);
    long pid = pid_of(wr, e->worker);
    if (e->t[1]) {
        snprintf(name, sizeof name, "prepare %s", c);
        put_span_on(wr, "chip", name, pid, tid, e->t[0], e->t[1]);
    }
    if (e->t[2] && e->t[3]) {
        snprintf(name, sizeof name, "execute %s", c);
        put_span_on(wr, "chip", name, pid, tid, e->t[2], e->t[3]);
    }
    uint64_t fin = e->t[3] ? e->t[3] : e->t[1];
    if (fin) {
        snprintf(name, sizeof name, "finalize %s", c);
        put_span_on(wr, "chip", name, pid, tid, fin, e->ts);
    }
}

/* A run's phase events in order: building until the next phase, executing
 * until the terminal one, then the terminal instant. */
static void put_phases(writer *wr, const st_trace_event *e, uint32_t i) {
    if (e->a == ST_RUN_COMPLETED || e->a == ST_RUN_FAILED) {
        begin_event(wr);
        fprintf(wr->f,
                "{\"ph\":\"i\",\"cat\":\"run\",\"s\":\"p\",\"name\":\"run %llu %s\",\"pid\":%ld,"
                "\"tid\":%d,\"ts\":",
                (unsigned long long)e->run, e->a == ST_RUN_FAILED ? "failed" : "completed", wr->pid,
                TID_RUNS);
        put_us(wr->f, wr->w->trace.t0, e->ts);
        fputc('}', wr->f);
    }
    if (e->a != ST_RUN_BUILDING && e->a != ST_RUN_EXECUTING)
        return;
    for (uint32_t k = i + 1; k < wr->n; k++) { /* the run's next phase */
        const st_trace_event *x = &wr->ev[k];
        if (x->kind != ST_TEV_PHASE || x->run != e->run)
            continue;
        int terminal = x->a == ST_RUN_COMPLETED || x->a == ST_RUN_FAILED;
        if (!terminal && (e->a == ST_RUN_EXECUTING || x->a != ST_TRACE_BUILT))
            continue;
        char name[64];
        snprintf(name, sizeof name, "run %llu %s", (unsigned long long)e->run,
                 e->a == ST_RUN_BUILDING ? "building" : "executing");
        put_span(wr, "run", name, TID_RUNS, e->ts, x->ts);
        return;
    }
}

static void put_events(writer *wr) {
    uint32_t edge_from = 0, edge_id = 0;
    for (uint32_t i = 0; i < wr->n; i++) {
        const st_trace_event *e = &wr->ev[i];
        switch (e->kind) {
        case ST_TEV_TASK:
            put_task(wr, e, edge_from, i);
            edge_from = i + 1;
            break;
        case ST_TEV_EDGE:
            put_edge(wr, e, ++edge_id);
            break;
        case ST_TEV_NOT_RUN:
            put_not_run(wr, e);
            edge_from = i + 1;
            break;
        case ST_TEV_PHASE:
            put_phases(wr, e, i);
            break;
        case ST_TEV_CHIP:
            put_chip(wr, e);
            break;
        case ST_TEV_WAIT:
            put_span(wr, "wait", e->a ? "heap ring full" : "window full", TID_ORCH, e->t[0], e->ts);
            break;
        default:
            break;
        }
    }
    const st_trace_lane *l = &wr->w->trace.engine;
    if (l->dropped) {
        begin_event(wr);
        fprintf(wr->f,
                "{\"ph\":\"i\",\"cat\":\"strata\",\"name\":\"dropped events\",\"s\":\"t\","
                "\"pid\":%ld,\"tid\":%d,\"ts\":",
                wr->pid, TID_ORCH);
        put_us(wr->f, wr->w->trace.t0, l->full_ts);
        fprintf(wr->f, ",\"args\":{\"count\":%llu}}", (unsigned long long)l->dropped);
    }
}

static int index_tasks(writer *wr) {
    wr->tasks = st_malloc(((size_t)wr->n + 1) * sizeof *wr->tasks);
    if (!wr->tasks)
        return st_fail_nomem("writing the trace: the task index",
                             ((size_t)wr->n + 1) * sizeof *wr->tasks);
    for (uint32_t i = 0; i < wr->n; i++)
        if (wr->ev[i].kind == ST_TEV_TASK)
            wr->tasks[wr->ntasks++] = (struct task_key){wr->ev[i].run, wr->ev[i].a, i};
    qsort(wr->tasks, wr->ntasks, sizeof *wr->tasks, cmp_task);
    return STRATA_OK;
}

/* The whole file into f; nonzero if a write failed. */
static int put_file(writer *wr) {
    strata_worker *w = wr->w;
    fputs("{\"traceEvents\":[", wr->f);
    put_metadata(wr);
    put_events(wr);
    fprintf(wr->f,
            "\n],\"displayTimeUnit\":\"ns\",\"otherData\":{\"producer\":\"strata\","
            "\"strata_version\":\"%d.%d.%d\",\"format\":1,\"clock\":\"CLOCK_MONOTONIC\","
            "\"t0_ns\":%llu,\"dropped\":%llu,\"times_rejected\":%llu,\"lanes\":%d}}\n",
            STRATA_VERSION_MAJOR, STRATA_VERSION_MINOR, STRATA_VERSION_PATCH,
            (unsigned long long)w->trace.t0, (unsigned long long)w->trace.engine.dropped,
            (unsigned long long)w->trace.times_rejected, wr->lanes);
    int bad = ferror(wr->f);
    bad |= fflush(wr->f) != 0;
    return bad;
}

/* Written to PATH.tmp.<pid> and renamed over PATH once complete: a crash
 * mid-write leaves the old file (or none) and a stray temporary, never a
 * truncated PATH, and a reader sees the old file or the new one whole. */
int st_trace_write(strata_worker *w, const char *path) {
    writer wr = {.w = w,
                 .ev = w->trace.engine.ev,
                 .n = st_trace_lane_count(&w->trace.engine),
                 .pid = (long)getpid(),
                 .first = 1};
    int rc = index_tasks(&wr);
    if (rc != STRATA_OK)
        return rc;
    size_t len = strlen(path) + 32;
    char *tmp = st_malloc(len);
    if (!tmp) {
        st_free(wr.tasks);
        return st_fail_nomem("writing the trace: the temporary file's name", len);
    }
    snprintf(tmp, len, "%s.tmp.%ld", path, wr.pid);
    wr.f = fopen(tmp, "w");
    if (!wr.f) {
        rc = st_fail(STRATA_EINVAL, "writing the trace: cannot open '%s' (for trace_path '%s'): %s",
                     tmp, path, strerror(errno));
        st_free(tmp);
        st_free(wr.tasks);
        return rc;
    }
    int bad = put_file(&wr);
    int err = bad ? errno : 0;
    if (fclose(wr.f) != 0 && !bad)
        bad = 1, err = errno;
    if (!bad && rename(tmp, path) != 0)
        bad = 1, err = errno;
    if (bad) {
        unlink(tmp); /* nothing half-written stays behind */
        rc = st_fail(STRATA_EINVAL, "writing the trace: writing '%s' failed: %s", path,
                     strerror(err));
    }
    st_free(tmp);
    st_free(wr.tasks);
    return rc;
}
