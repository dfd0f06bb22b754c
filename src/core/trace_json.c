/* core/trace_json.c - the trace file: the engine lane's events as one Chrome
 * trace event JSON file (docs/api.md "Tracing and statistics"; the format
 * the strata-trace tool reads).
 *
 * Owns: the lane and process metadata, names resolved from ids (callables,
 * endpoints), the pairing of run phases and of dependency edges with the
 * tasks at their ends, JSON string escaping, and the parts of a child
 * Worker's region: its own records and one worker per origin its own child
 * Workers' records were copied under (named by their path, "next-level j /
 * next-level k", their runs "nj/nk/...").
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
#include "core/trace_child.h"
#include "strata/strata.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/stamp.h"

/* Lane numbers of one worker (fewer than WORKER_TIDS); child Worker j's are
 * offset by (j + 1) * CHILD_TIDS, its own child Worker k's by (k + 1) *
 * WORKER_TIDS more. */
enum {
    TID_RUNS = 1,
    TID_ORCH = 2,
    TID_SUB0 = 10,
    TID_NEXT0 = 1000,
    WORKER_TIDS = 2000,
    CHILD_TIDS = WORKER_TIDS * ST_TRACE_ORIGINS
};
_Static_assert(TID_SUB0 + STRATA_MAX_SUB_WORKERS < TID_NEXT0 &&
                   TID_NEXT0 + STRATA_MAX_NEXT_LEVEL < WORKER_TIDS,
               "one worker's lanes fit its tid range");
_Static_assert((long long)(STRATA_MAX_NEXT_LEVEL + 1) * CHILD_TIDS < 0x7fffffff,
               "every tid is an int");

struct task_key {
    uint64_t run;
    uint32_t seq;
    uint32_t idx; /* in the lane */
};

/* What every part of the file shares. */
typedef struct sink {
    FILE *f;
    int first;        /* no event written yet: no comma before the next */
    int lanes;        /* thread_name entries written */
    uint32_t edge_id; /* flow ids, unique in the file */
    uint64_t dropped; /* over every lane */
    uint64_t rejected;
    uint64_t t0;          /* ts 0: the top-level worker's init (a stamp) */
    st_stamp_scale scale; /* the file's stamps to ns (util/stamp.h) */
} sink;

/* One worker's events into the file: the top-level worker's own, a process
 * chip's (parent names, the chip's lane) or a child Worker's (its names,
 * lanes of its own). */
typedef struct writer {
    FILE *f;
    sink *o;
    const st_trace_names *nm;
    const st_trace_event *ev;
    uint32_t n;
    struct task_key *tasks; /* the TASK events, sorted by (run, seq) */
    uint32_t ntasks;
    long pid;                  /* the process of the worker's engine */
    int tid_base;              /* added to every lane number: a child Worker's lanes are its own */
    const char *path;          /* a child Worker's: "next-level 0", "next-level 0 / next-level 1" */
    const char *run_prefix;    /* its runs' and tasks' prefix: "", "n0/", "n0/n1/" */
    unsigned origin;           /* the records of ev[] that are this worker's (trace.h) */
    int in_parent;             /* that child Worker is hosted by a thread of its parent's process */
    const st_trace_lane *lane; /* its drops */
    uint64_t dropped, full_ts;
    const st_trace_msgs *msgs; /* the failed tasks' messages (ST_TEV_ERROR) */
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

/* The microseconds from stamp `from` to stamp `to` (0 if to is earlier),
 * with 3 decimals: whole nanoseconds. Both ends are converted, so the ts and
 * dur of one event and the ts of the next keep the order their stamps had. */
static void put_us(const writer *wr, uint64_t from, uint64_t to) {
    const st_stamp_scale *sc = &wr->o->scale;
    uint64_t a = st_stamp_to_ns(sc, from), b = st_stamp_to_ns(sc, to);
    uint64_t d = b > a ? b - a : 0;
    fprintf(wr->f, "%llu.%03llu", (unsigned long long)(d / 1000), (unsigned long long)(d % 1000));
}

/* The kind of a record of this worker, or 0 for another's: a child Worker's
 * region holds its own records and its child Workers', each drawn as a
 * worker of its own. */
static unsigned kind_of(const writer *wr, const st_trace_event *e) {
    return ST_TEV_ORIGIN(e->kind) == wr->origin ? ST_TEV_KIND(e->kind) : 0;
}

static void begin_event(writer *wr) {
    fputs(wr->o->first ? "\n" : ",\n", wr->f);
    wr->o->first = 0;
}

static const char *callable_name(const writer *wr, uint32_t id) {
    return id < wr->nm->ncallables ? wr->nm->callable[id] : "?";
}

/* A worker number the names do not know (a child's records are not trusted)
 * goes to the orchestrator's lane. */
static int tid_of(const writer *wr, int32_t worker) {
    if (worker >= ST_TRACE_NEXT && worker - ST_TRACE_NEXT < wr->nm->nnext)
        return wr->tid_base + TID_NEXT0 + (worker - ST_TRACE_NEXT);
    if (worker < 0 || worker > wr->nm->nsubs) /* nsubs: the helper */
        return wr->tid_base + TID_ORCH;
    return wr->tid_base + TID_SUB0 + worker;
}

/* The process a worker's task bodies ran in: a process child's own pid. */
static long pid_of(const writer *wr, int32_t worker) {
    const st_trace_names *nm = wr->nm;
    int32_t pid = 0;
    if (worker >= ST_TRACE_NEXT && worker - ST_TRACE_NEXT < nm->nnext)
        pid = nm->next_pid[worker - ST_TRACE_NEXT];
    else if (worker >= 0 && worker < nm->nsubs)
        pid = nm->sub_pid[worker];
    return pid ? (long)pid : wr->pid;
}

/* A child Worker's runs and tasks are told apart from its parent's by a
 * prefix: "n<id>/" per level (its next-level id in its parent). */
static void put_run_id(writer *wr, uint64_t run) {
    if (wr->run_prefix[0])
        fprintf(wr->f, "\"%s%llu\"", wr->run_prefix, (unsigned long long)run);
    else
        fprintf(wr->f, "%llu", (unsigned long long)run);
}

static void put_task_id(writer *wr, uint64_t run, uint32_t seq) {
    fprintf(wr->f, "\"%s%llu:%u\"", wr->run_prefix, (unsigned long long)run, seq);
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

static void put_lane_name_as(writer *wr, long pid, int tid, const char *full) {
    put_name(wr, "thread_name", pid, wr->tid_base + tid, full);
    wr->o->lanes++;
}

static void put_lane_name(writer *wr, long pid, int tid, const char *name) {
    char full[192];
    if (wr->in_parent && pid == wr->pid) /* beside the parent's own lanes: say whose */
        snprintf(full, sizeof full, "%s: %s", wr->path, name);
    else
        snprintf(full, sizeof full, "%s", name);
    put_lane_name_as(wr, pid, tid, full);
}

/* A process's name; a child Worker's own processes say whose they are. */
static void put_process_name(writer *wr, long pid, const char *name) {
    char full[192];
    if (wr->path)
        snprintf(full, sizeof full, "%s: %s", wr->path, name);
    else
        snprintf(full, sizeof full, "%s", name);
    put_name(wr, "process_name", pid, -1, full);
}

static void put_sub_names(writer *wr) {
    char name[96];
    for (int i = 0; i < wr->nm->nsubs; i++) {
        long pid = pid_of(wr, i);
        if (pid != wr->pid) {
            snprintf(name, sizeof name, "sub worker %d (process)", i);
            put_process_name(wr, pid, name);
        }
        snprintf(name, sizeof name, "sub %d", i);
        put_lane_name(wr, pid, TID_SUB0 + i, name);
    }
    put_lane_name(wr, wr->pid, TID_SUB0 + wr->nm->nsubs, "helper");
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
    const st_trace_names *nm = wr->nm;
    char name[96], own[64];
    for (int j = 0; j < nm->nnext; j++) {
        const char *label = label_name(nm->next_label[j], own, sizeof own);
        int chip = strncmp(label, "chip ", 5) == 0;
        long pid = pid_of(wr, ST_TRACE_NEXT + j);
        if (pid != wr->pid) {
            if (chip)
                snprintf(name, sizeof name, "%s (process)", label);
            else
                snprintf(name, sizeof name, "L%d child %d (process)", nm->level - 1, j);
            put_process_name(wr, pid, name);
        }
        if (chip) {
            snprintf(name, sizeof name, "%s", label);
            put_lane_name(wr, pid, TID_NEXT0 + j, name);
        } else if (wr->path) { /* a child Worker's child Worker: its path is its name */
            char full[192];
            snprintf(full, sizeof full, "%s / next-level %d", wr->path, j);
            put_lane_name_as(wr, pid, TID_NEXT0 + j, full);
        } else {
            snprintf(name, sizeof name, "next-level %d", j);
            put_lane_name(wr, pid, TID_NEXT0 + j, name);
        }
    }
}

static void put_metadata(writer *wr) {
    char name[96];
    snprintf(name, sizeof name, "strata L%d worker", wr->nm->level);
    if (!wr->path) /* a child Worker's process was named by its parent's lanes */
        put_process_name(wr, wr->pid, name);
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
    uint64_t t0 = wr->o->t0;
    fputs("\"args\":{\"run\":", f);
    put_run_id(wr, e->run);
    fputs(",\"task\":", f);
    put_task_id(wr, e->run, e->a);
    fprintf(f, ",\"worker\":%d,\"submit_us\":",
            e->worker >= ST_TRACE_NEXT ? e->worker - ST_TRACE_NEXT : e->worker);
    put_us(wr, t0, e->t[0]);
    fputs(",\"ready_us\":", f);
    put_us(wr, t0, e->t[1]);
    fputs(",\"dispatch_us\":", f);
    put_us(wr, t0, e->t[2]);
    if (e->b >> 31) /* a group's member: the members share the task id */
        fprintf(f, ",\"member\":%u", (e->b >> 16) & 0x7fffu);
    fprintf(f, ",\"measured\":%s,\"status\":\"%s\"", e->flags & ST_TEVF_MEASURED ? "true" : "false",
            status_name(e->status));
    /* Its message follows it within a few records (a chip's phases between). */
    for (uint32_t k = i + 1; e->status && wr->msgs && k < wr->n && k <= i + 3; k++) {
        /* a child writes these records in shared memory: one copy is checked and used */
        const st_trace_event x = wr->ev[k];
        if (kind_of(wr, &x) != ST_TEV_ERROR || x.run != e->run || x.a != e->a ||
            x.b != ((e->b >> 16) & 0x7fffu) || x.t[0] >= wr->msgs->n || x.t[0] >= ST_TRACE_MSGS)
            continue;
        fputs(",\"error\":", f);
        put_str(f, wr->msgs->text[x.t[0]]);
        break;
    }
    fputs(",\"deps\":[", f);
    int any = 0;
    for (uint32_t k = edge_from; k < i; k++) {
        const st_trace_event *d = &wr->ev[k];
        if (kind_of(wr, d) != ST_TEV_EDGE || d->run != e->run || d->b != e->a)
            continue;
        if (any)
            fputc(',', f);
        put_task_id(wr, d->run, d->a);
        any = 1;
    }
    fputs("]}}", f);
}

static void put_task(writer *wr, const st_trace_event *e, uint32_t edge_from, uint32_t i) {
    FILE *f = wr->f;
    uint64_t t0 = wr->o->t0;
    begin_event(wr);
    fputs("{\"ph\":\"X\",\"cat\":\"task\",\"name\":", f);
    put_str(f, callable_name(wr, e->b & 0xffffu));
    fprintf(f, ",\"pid\":%ld,\"tid\":%d,\"ts\":", pid_of(wr, e->worker), tid_of(wr, e->worker));
    put_us(wr, t0, e->t[3]);
    fputs(",\"dur\":", f);
    put_us(wr, e->t[3], e->ts > e->t[3] ? e->ts : e->t[3]);
    fputc(',', f);
    put_task_args(wr, e, edge_from, i);
}

static void put_not_run(writer *wr, const st_trace_event *e) {
    FILE *f = wr->f;
    char name[96];
    snprintf(name, sizeof name, "%s (not run)", callable_name(wr, e->b & 0xffffu));
    begin_event(wr);
    fputs("{\"ph\":\"i\",\"cat\":\"task\",\"s\":\"t\",\"name\":", f);
    put_str(f, name);
    fprintf(f, ",\"pid\":%ld,\"tid\":%d,\"ts\":", wr->pid, wr->tid_base + TID_ORCH);
    put_us(wr, wr->o->t0, e->ts);
    fputs(",\"args\":{\"run\":", f);
    put_run_id(wr, e->run);
    fputs(",\"task\":", f);
    put_task_id(wr, e->run, e->a);
    fputs(",\"worker\":-1,\"submit_us\":", f);
    put_us(wr, wr->o->t0, e->t[0]);
    fprintf(f, ",\"status\":\"%s\"}}", status_name(e->status));
}

static void put_edge(writer *wr, const st_trace_event *d, uint32_t id) {
    const st_trace_event *p = find_task(wr, d->run, d->a);
    const st_trace_event *c = find_task(wr, d->run, d->b);
    if (!p || !c)
        return; /* an end's record was dropped */
    FILE *f = wr->f;
    uint64_t t0 = wr->o->t0;
    begin_event(wr);
    fprintf(
        f,
        "{\"ph\":\"s\",\"cat\":\"dep\",\"name\":\"dep\",\"id\":%u,\"pid\":%ld,\"tid\":%d,\"ts\":",
        id, pid_of(wr, p->worker), tid_of(wr, p->worker));
    put_us(wr, t0, p->ts);
    fputc('}', f);
    begin_event(wr);
    fprintf(f,
            "{\"ph\":\"f\",\"cat\":\"dep\",\"name\":\"dep\",\"bp\":\"e\",\"id\":%u,\"pid\":%ld,"
            "\"tid\":%d,\"ts\":",
            id, pid_of(wr, c->worker), tid_of(wr, c->worker));
    put_us(wr, t0, c->t[3]);
    fputc('}', f);
}

static void put_span_on(writer *wr, const char *cat, const char *name, long pid, int tid,
                        uint64_t from, uint64_t to) {
    FILE *f = wr->f;
    begin_event(wr);
    fprintf(f, "{\"ph\":\"X\",\"cat\":\"%s\",\"name\":", cat);
    put_str(f, name);
    fprintf(f, ",\"pid\":%ld,\"tid\":%d,\"ts\":", pid, tid);
    put_us(wr, wr->o->t0, from);
    fputs(",\"dur\":", f);
    put_us(wr, from, to > from ? to : from);
    fputc('}', f);
}

static void put_span(writer *wr, const char *cat, const char *name, int tid, uint64_t from,
                     uint64_t to) {
    put_span_on(wr, cat, name, wr->pid, wr->tid_base + tid, from, to);
}

/* A chip task's native phases on its lane (a launch never seen: no execute). */
static void put_chip(writer *wr, const st_trace_event *e) {
    const char *c = callable_name(wr, e->b & 0xffffu);
    char name[96];
    int tid = tid_of(wr, e->worker);
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
    char run[48];
    snprintf(run, sizeof run, "%s%llu", wr->run_prefix, (unsigned long long)e->run);
    if (e->a == ST_RUN_COMPLETED || e->a == ST_RUN_FAILED) {
        begin_event(wr);
        fprintf(wr->f,
                "{\"ph\":\"i\",\"cat\":\"run\",\"s\":\"p\",\"name\":\"run %s %s\",\"pid\":%ld,"
                "\"tid\":%d,\"ts\":",
                run, e->a == ST_RUN_FAILED ? "failed" : "completed", wr->pid,
                wr->tid_base + TID_RUNS);
        put_us(wr, wr->o->t0, e->ts);
        fputc('}', wr->f);
    }
    if (e->a != ST_RUN_BUILDING && e->a != ST_RUN_EXECUTING)
        return;
    for (uint32_t k = i + 1; k < wr->n; k++) { /* the run's next phase */
        const st_trace_event *x = &wr->ev[k];
        if (kind_of(wr, x) != ST_TEV_PHASE || x->run != e->run)
            continue;
        int terminal = x->a == ST_RUN_COMPLETED || x->a == ST_RUN_FAILED;
        if (!terminal && (e->a == ST_RUN_EXECUTING || x->a != ST_TRACE_BUILT))
            continue;
        char name[64];
        snprintf(name, sizeof name, "run %s %s", run,
                 e->a == ST_RUN_BUILDING ? "building" : "executing");
        put_span(wr, "run", name, TID_RUNS, e->ts, x->ts);
        return;
    }
}

static void put_events(writer *wr) {
    uint32_t edge_from = 0;
    for (uint32_t i = 0; i < wr->n; i++) {
        const st_trace_event *e = &wr->ev[i];
        switch (kind_of(wr, e)) {
        case ST_TEV_TASK:
            put_task(wr, e, edge_from, i);
            edge_from = i + 1;
            break;
        case ST_TEV_EDGE:
            put_edge(wr, e, ++wr->o->edge_id);
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
    wr->o->dropped += wr->dropped;
    if (wr->dropped) { /* on the orchestrator's lane, or a process chip's own */
        int chip = !wr->path && wr->n && kind_of(wr, &wr->ev[0]) == ST_TEV_CHIP;
        begin_event(wr);
        fprintf(wr->f,
                "{\"ph\":\"i\",\"cat\":\"strata\",\"name\":\"dropped events\",\"s\":\"t\","
                "\"pid\":%ld,\"tid\":%d,\"ts\":",
                chip ? pid_of(wr, wr->ev[0].worker) : wr->pid,
                chip ? tid_of(wr, wr->ev[0].worker) : wr->tid_base + TID_ORCH);
        put_us(wr, wr->o->t0, wr->full_ts);
        fprintf(wr->f, ",\"args\":{\"count\":%llu}}", (unsigned long long)wr->dropped);
    }
}

static int index_tasks(writer *wr) {
    wr->tasks = st_malloc(((size_t)wr->n + 1) * sizeof *wr->tasks);
    if (!wr->tasks)
        return st_fail_nomem("writing the trace: the task index",
                             ((size_t)wr->n + 1) * sizeof *wr->tasks);
    for (uint32_t i = 0; i < wr->n; i++)
        if (kind_of(wr, &wr->ev[i]) == ST_TEV_TASK)
            wr->tasks[wr->ntasks++] = (struct task_key){wr->ev[i].run, wr->ev[i].a, i};
    qsort(wr->tasks, wr->ntasks, sizeof *wr->tasks, cmp_task);
    return STRATA_OK;
}

/* One worker's part of the file: its lanes' names (unless it only adds
 * events to lanes named already), then its events. */
static int put_part(writer *wr, int names) {
    int rc = index_tasks(wr);
    if (rc != STRATA_OK)
        return rc;
    if (names)
        put_metadata(wr);
    put_events(wr);
    st_free(wr->tasks);
    wr->tasks = NULL;
    wr->ntasks = 0;
    return STRATA_OK;
}

/* What a child Worker's region holds of one origin (core/trace.h): its
 * events (not its names), and the drops it reported. */
typedef struct origin_tally {
    uint32_t events;
    uint64_t dropped, full_ts;
} origin_tally;

static void tally_origins(const st_trace_event *ev, uint32_t n, origin_tally *t) {
    memset(t, 0, ST_TRACE_ORIGINS * sizeof *t);
    for (uint32_t i = 0; i < n; i++) {
        const st_trace_event e = ev[i]; /* one copy, checked */
        unsigned o = ST_TEV_ORIGIN(e.kind);
        if (o >= ST_TRACE_ORIGINS)
            continue;
        if (ST_TEV_KIND(e.kind) == ST_TEV_DROPS) {
            if (t[o].dropped == 0)
                t[o].full_ts = e.ts;
            t[o].dropped += e.t[0];
        } else if (ST_TEV_KIND(e.kind) != ST_TEV_NAME) {
            t[o].events++;
        }
    }
}

/* Child Worker `child`'s own child Worker origin - 1: its part of the file,
 * named by the records the child Worker copied up with its events. Events
 * that no names came with (their first entry was dropped) count as dropped. */
static int put_grandchild(const writer *child, unsigned origin, const origin_tally *t) {
    st_trace_names *nm = st_malloc(sizeof *nm);
    if (!nm)
        return st_fail_nomem("writing the trace: a child Worker's child's names", sizeof *nm);
    if (!st_trace_names_decode(child->ev, child->n, origin, nm)) {
        child->o->dropped += t->events + t->dropped;
        st_free(nm);
        return STRATA_OK;
    }
    char path[96], prefix[48];
    snprintf(path, sizeof path, "%s / next-level %u", child->path, origin - 1);
    snprintf(prefix, sizeof prefix, "%sn%u/", child->run_prefix, origin - 1);
    writer wr = *child;
    wr.tasks = NULL;
    wr.ntasks = 0;
    wr.nm = nm;
    wr.pid = nm->pid ? (long)nm->pid : child->pid;
    wr.path = path;
    wr.run_prefix = prefix;
    wr.origin = origin;
    wr.in_parent = wr.pid == child->pid;
    wr.tid_base = child->tid_base + (int)origin * WORKER_TIDS;
    wr.dropped = t->dropped;
    wr.full_ts = t->full_ts;
    int rc = put_part(&wr, 1);
    st_free(nm);
    return rc;
}

/* A child Worker's whole trace: its own events, then each of its own child
 * Workers' that it copied into its region. */
static int put_child_worker(writer *wr) {
    STRATA_TRY(put_part(wr, 1));
    origin_tally *t = st_malloc(ST_TRACE_ORIGINS * sizeof *t);
    if (!t)
        return st_fail_nomem("writing the trace: a child Worker's tally",
                             ST_TRACE_ORIGINS * sizeof *t);
    tally_origins(wr->ev, wr->n, t);
    int rc = STRATA_OK;
    for (unsigned o = 1; o < ST_TRACE_ORIGINS && rc == STRATA_OK; o++)
        if (t[o].events || t[o].dropped)
            rc = put_grandchild(wr, o, &t[o]);
    st_free(t);
    return rc;
}

/* The process children's own events (core/trace_child.h): a process chip's
 * native phases on its lane as the parent named it; a child Worker's whole
 * trace, with the names it left, on lanes of its own. A child that died
 * before it named its events leaves its chip phases, not its Worker events. */
static int put_children(writer *top, strata_worker *w) {
    for (int j = 0; j < top->nm->nnext && j < STRATA_MAX_NEXT_LEVEL; j++) {
        st_trace_region_view v;
        STRATA_TRY(st_trace_region_read(w, j, &v));
        if (!v.ev || (v.kind == ST_REGION_WORKER && !v.named))
            continue;
        writer wr = *top;
        wr.tasks = NULL;
        wr.ntasks = 0;
        wr.ev = v.ev;
        wr.n = v.n;
        wr.dropped = v.dropped;
        wr.full_ts = v.full_ts;
        int rc;
        if (v.kind == ST_REGION_WORKER) {
            char path[32], prefix[16];
            snprintf(path, sizeof path, "next-level %d", j);
            snprintf(prefix, sizeof prefix, "n%d/", j);
            wr.nm = v.names;
            wr.msgs = v.msgs;
            wr.pid = (long)v.pid;
            wr.path = path;
            wr.run_prefix = prefix;
            wr.in_parent = wr.pid == top->pid;
            wr.tid_base = (j + 1) * CHILD_TIDS;
            top->o->rejected += v.times_rejected;
            rc = put_child_worker(&wr);
        } else {
            rc = put_part(&wr, 0);
        }
        st_trace_region_view_free(&v);
        STRATA_TRY(rc);
    }
    return STRATA_OK;
}

/* The whole file into f: STRATA_OK, 1 if a write failed, or the failure. */
static int put_file(writer *wr, strata_worker *w) {
    sink *o = wr->o;
    fputs("{\"traceEvents\":[", wr->f);
    int rc = put_part(wr, 1);
    if (rc == STRATA_OK)
        rc = put_children(wr, w);
    if (rc != STRATA_OK)
        return rc;
    fprintf(wr->f,
            "\n],\"displayTimeUnit\":\"ns\",\"otherData\":{\"producer\":\"strata\","
            "\"strata_version\":\"%d.%d.%d\",\"format\":1,\"clock\":\"CLOCK_MONOTONIC\","
            "\"t0_ns\":%llu,\"dropped\":%llu,\"times_rejected\":%llu,\"lanes\":%d}}\n",
            STRATA_VERSION_MAJOR, STRATA_VERSION_MINOR, STRATA_VERSION_PATCH,
            (unsigned long long)st_stamp_to_ns(&o->scale, o->t0), (unsigned long long)o->dropped,
            (unsigned long long)o->rejected, o->lanes);
    int bad = ferror(wr->f);
    bad |= fflush(wr->f) != 0;
    return bad ? 1 : STRATA_OK;
}

/* Written to PATH.tmp.<pid> and renamed over PATH once complete: a crash
 * mid-write leaves the old file (or none) and a stray temporary, never a
 * truncated PATH, and a reader sees the old file or the new one whole. */
int st_trace_write(strata_worker *w, const char *path) {
    st_trace_names *nm = st_malloc(sizeof *nm);
    if (!nm)
        return st_fail_nomem("writing the trace: the name table", sizeof *nm);
    st_trace_names_of(w, nm);
    sink o = {.first = 1,
              .t0 = w->trace.t0,
              .scale = st_stamp_scale_now(), /* after every stamp the file holds */
              .rejected = w->trace.times_rejected};
    writer wr = {.o = &o,
                 .nm = nm,
                 .ev = w->trace.lane->ev,
                 .n = st_trace_lane_count(w->trace.lane),
                 .pid = (long)getpid(),
                 .run_prefix = "",
                 .dropped = w->trace.lane->dropped,
                 .full_ts = w->trace.lane->full_ts,
                 .msgs = w->trace.msgs};
    int rc = STRATA_OK;
    size_t len = strlen(path) + 32;
    char *tmp = st_malloc(len);
    if (!tmp) {
        st_free(nm);
        return st_fail_nomem("writing the trace: the temporary file's name", len);
    }
    snprintf(tmp, len, "%s.tmp.%ld", path, wr.pid);
    wr.f = o.f = fopen(tmp, "w");
    if (!wr.f) {
        rc = st_fail(STRATA_EINVAL, "writing the trace: cannot open '%s' (for trace_path '%s'): %s",
                     tmp, path, strerror(errno));
        st_free(tmp);
        st_free(nm);
        return rc;
    }
    int put = put_file(&wr, w);
    int bad = put != STRATA_OK;
    int err = bad ? errno : 0;
    if (fclose(wr.f) != 0 && !bad)
        bad = 1, err = errno;
    if (!bad && rename(tmp, path) != 0)
        bad = 1, err = errno;
    if (bad) {
        unlink(tmp);       /* nothing half-written stays behind */
        rc = put < 0 ? put /* the failure, described */
                     : st_fail(STRATA_EINVAL, "writing the trace: writing '%s' failed: %s", path,
                               strerror(err));
    }
    st_free(tmp);
    st_free(nm);
    return rc;
}
