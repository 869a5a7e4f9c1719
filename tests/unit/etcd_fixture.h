/* etcd_fixture.h - a throwaway single-member etcd for unit tests.
 *
 * etcd_fixture_start() runs /usr/bin/etcd (or $KEEL_ETCD) as a child process
 * on two free loopback ports with its data in a fresh temporary directory,
 * and waits (at most 20 s) until it answers a range request on its v3 JSON
 * gateway. etcd_fixture_stop() kills it (SIGKILL, then waits) and removes
 * the directory. A test that needs etcd calls etcd_fixture_available()
 * first: when the binary is absent it prints why and the test is skipped;
 * when the binary is there but does not start, the test fails.
 *
 * Header-only, for tests: static functions, one etcd per process.
 */
#ifndef KEEL_TEST_ETCD_FIXTURE_H
#define KEEL_TEST_ETCD_FIXTURE_H

#include <arpa/inet.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "coord/etcd_client.h"

#include <cjson/cJSON.h>

typedef struct etcd_fixture {
    pid_t pid;
    char dir[64];
    char url[64]; /* http://127.0.0.1:PORT, the client URL */
} etcd_fixture;

static const char *etcd_fixture_bin(void) {
    const char *b = getenv("KEEL_ETCD");
    return b && *b ? b : "/usr/bin/etcd";
}

/* 1 if the etcd binary exists; otherwise prints a skip notice and 0. */
static int etcd_fixture_available(const char *what) {
    if (access(etcd_fixture_bin(), X_OK) == 0) return 1;
    fprintf(stderr, "SKIPPED %s: no etcd binary at %s (install etcd-server: make deps)\n", what,
            etcd_fixture_bin());
    return 0;
}

/* A loopback port that was free a moment ago. */
static int etcd_fixture_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) ||
        getsockname(fd, (struct sockaddr *)&a, &len)) {
        if (fd >= 0) close(fd);
        return -1;
    }
    close(fd);
    return ntohs(a.sin_port);
}

static int etcd_fixture_rm(const char *p, const struct stat *st, int flag, struct FTW *f) {
    (void)st, (void)flag, (void)f;
    return remove(p);
}

/* Waits until url answers a range request; 0, or -1 after 20 s. */
static int etcd_fixture_wait(const char *url, pid_t pid) {
    etcd_client *c = NULL;
    char err[ETCD_ERR_MAX];
    if (etcd_client_new(url, 1000, &c, err, sizeof err)) return -1;
    int ok = -1;
    for (int i = 0; i < 200 && ok; i++) {
        cJSON *r = NULL;
        if (etcd_post(c, "/v3/kv/range", "{\"key\":\"AA==\"}", &r) == 0) ok = 0;
        cJSON_Delete(r);
        int st;
        if (ok && waitpid(pid, &st, WNOHANG) == pid) break; /* etcd exited */
        if (ok) usleep(100 * 1000);
    }
    etcd_client_free(c);
    return ok;
}

/* Starts etcd; 0, or -1 with a message on stderr. */
static int etcd_fixture_start(etcd_fixture *fx) {
    memset(fx, 0, sizeof *fx);
    strcpy(fx->dir, "/tmp/keel-test-etcd-XXXXXX");
    if (!mkdtemp(fx->dir)) return -1;
    for (int attempt = 0; attempt < 3; attempt++) {
        int cp = etcd_fixture_port(), pp = etcd_fixture_port();
        if (cp < 0 || pp < 0 || cp == pp) continue;
        char data[128], log[128], curl_[64], purl[64], initial[96];
        snprintf(data, sizeof data, "%s/data%d", fx->dir, attempt);
        snprintf(log, sizeof log, "%s/etcd.log", fx->dir);
        snprintf(curl_, sizeof curl_, "http://127.0.0.1:%d", cp);
        snprintf(purl, sizeof purl, "http://127.0.0.1:%d", pp);
        snprintf(initial, sizeof initial, "default=%s", purl);
        pid_t pid = fork();
        if (pid < 0) return -1;
        if (pid == 0) {
            int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
            if (fd >= 0) dup2(fd, 1), dup2(fd, 2);
            execl(etcd_fixture_bin(), "etcd", "--name", "default", "--data-dir", data,
                  "--listen-client-urls", curl_, "--advertise-client-urls", curl_,
                  "--listen-peer-urls", purl, "--initial-advertise-peer-urls", purl,
                  "--initial-cluster", initial, "--log-level", "warn", (char *)NULL);
            _exit(127);
        }
        if (etcd_fixture_wait(curl_, pid) == 0) {
            fx->pid = pid;
            snprintf(fx->url, sizeof fx->url, "%s", curl_);
            return 0;
        }
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        fprintf(stderr, "etcd on %s did not start (see %s); retrying\n", curl_, log);
    }
    return -1;
}

static void etcd_fixture_stop(etcd_fixture *fx) {
    if (fx->pid > 0) {
        kill(fx->pid, SIGKILL);
        waitpid(fx->pid, NULL, 0);
        fx->pid = 0;
    }
    if (fx->dir[0]) nftw(fx->dir, etcd_fixture_rm, 16, FTW_DEPTH | FTW_PHYS);
    fx->dir[0] = 0;
}

#endif
