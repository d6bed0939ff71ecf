/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Runs a libFuzzer driver over corpus files without libFuzzer, so that
 * `make check` replays the corpus with any compiler (and under ASan/UBSan
 * builds).  Arguments are files or directories (one level deep).
 */
#include "config.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static long
replay_file(const char *path)
{
    FILE *fp = fopen(path, "rb");
    uint8_t *buf = NULL;
    long len;

    if (fp == NULL || fseek(fp, 0, SEEK_END) != 0 || (len = ftell(fp)) < 0 ||
        fseek(fp, 0, SEEK_SET) != 0) {
        perror(path);
        if (fp)
            fclose(fp);
        return -1;
    }
    buf = malloc(len > 0 ? (size_t) len : 1);
    if (buf == NULL || fread(buf, 1, (size_t) len, fp) != (size_t) len) {
        fprintf(stderr, "%s: cannot read\n", path);
        free(buf);
        fclose(fp);
        return -1;
    }
    fclose(fp);
    LLVMFuzzerTestOneInput(buf, (size_t) len);
    free(buf);
    return 1;
}

int
main(int argc, char **argv)
{
    long files = 0;

    for (int i = 1; i < argc; i++) {
        struct stat st;
        DIR *dir;
        struct dirent *de;

        if (stat(argv[i], &st) != 0) {
            perror(argv[i]);
            return 1;
        }
        if (!S_ISDIR(st.st_mode)) {
            if (replay_file(argv[i]) < 0)
                return 1;
            files++;
            continue;
        }
        dir = opendir(argv[i]);
        if (dir == NULL) {
            perror(argv[i]);
            return 1;
        }
        while ((de = readdir(dir)) != NULL) {
            char path[4096];

            if (de->d_name[0] == '.')
                continue;
            snprintf(path, sizeof(path), "%s/%s", argv[i], de->d_name);
            if (replay_file(path) < 0) {
                closedir(dir);
                return 1;
            }
            files++;
        }
        closedir(dir);
    }
    printf("replayed %ld inputs\n", files);
    return files > 0 ? 0 : 1;
}
