/* tests/fuzz/replay_main.c - runs the API fuzzer's interpreter over saved
 * inputs, without libFuzzer, so every build (gcc, ASan, TSan) replays them.
 *
 * Owns: reading each file named on the command line (a directory: every file
 * in it) and handing it to LLVMFuzzerTestOneInput.
 * Must never: skip an unreadable input silently, or pass with no input.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path, size_t size) {
    FILE *f = fopen(path, "rb");
    uint8_t *buf = malloc(size ? size : 1);
    if (!f || !buf) {
        fprintf(stderr, "replay: cannot open or hold %s (%zu bytes)\n", path, size);
        if (f)
            fclose(f);
        free(buf);
        return -1;
    }
    size_t n = fread(buf, 1, size, f);
    int bad = ferror(f) || n != size;
    fclose(f);
    if (bad) {
        fprintf(stderr, "replay: read %zu of the %zu bytes of %s\n", n, size, path);
        free(buf);
        return -1;
    }
    LLVMFuzzerTestOneInput(buf, n);
    free(buf);
    return 0;
}

static int replay_path(const char *path, int *count) {
    struct stat st;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "replay: no such input %s\n", path);
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        (*count)++;
        return replay_file(path, (size_t)st.st_size);
    }
    DIR *d = opendir(path);
    if (!d)
        return -1;
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d)) != NULL && rc == 0) {
        if (e->d_name[0] == '.')
            continue;
        char child[4096];
        snprintf(child, sizeof child, "%s/%s", path, e->d_name);
        rc = replay_path(child, count);
    }
    closedir(d);
    return rc;
}

int main(int argc, char **argv) {
    int count = 0;
    for (int i = 1; i < argc; i++)
        if (replay_path(argv[i], &count) != 0)
            return 1;
    if (count == 0) {
        fprintf(stderr, "replay: no inputs given\n");
        return 1;
    }
    printf("replay: %d passed, 0 failed\n", count);
    return 0;
}
