// ThreadSanitizer builds only (CMakeLists.txt links it into every executable when
// STREAMVEC_SANITIZE holds thread): C11 threads over the pthread functions TSan intercepts.
//
// Debian's librdkafka creates its threads and locks its mutexes with glibc's C11 <threads.h>
// (thrd_create, mtx_lock, cnd_wait...), which call glibc's pthread code internally, past GCC 12's
// TSan interceptors: a thread TSan never saw starts (the first malloc in librdkafka's mock broker
// thread crashes in TSan's allocator, "SEGV on unknown address 0x000000000c38"), and its locks
// would be invisible (false races on what passes through librdkafka's queues). Defined in the
// executable, these take precedence over glibc's for librdkafka. glibc's mtx_t and cnd_t are
// pthread_mutex_t and pthread_cond_t under another name (its own thrd_* functions cast them).
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <threads.h>
#include <time.h>

static int Result(int rc) {
  if (rc == 0) return thrd_success;
  if (rc == ENOMEM) return thrd_nomem;
  if (rc == EBUSY) return thrd_busy;
  if (rc == ETIMEDOUT) return thrd_timedout;
  return thrd_error;
}

struct Start {
  thrd_start_t fn;
  void* arg;
};

static void* Trampoline(void* p) {
  struct Start s = *(struct Start*)p;
  free(p);
  return (void*)(intptr_t)s.fn(s.arg);
}

int thrd_create(thrd_t* thr, thrd_start_t fn, void* arg) {
  struct Start* s = malloc(sizeof(*s));
  if (s == NULL) return thrd_nomem;
  s->fn = fn;
  s->arg = arg;
  const int rc = pthread_create((pthread_t*)thr, NULL, Trampoline, s);
  if (rc != 0) free(s);
  return Result(rc);
}

int thrd_join(thrd_t thr, int* res) {
  void* value = NULL;
  const int rc = pthread_join((pthread_t)thr, &value);
  if (rc == 0 && res != NULL) *res = (int)(intptr_t)value;
  return Result(rc);
}

int thrd_detach(thrd_t thr) { return Result(pthread_detach((pthread_t)thr)); }

int mtx_init(mtx_t* m, int type) {
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  if (type & mtx_recursive) pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
  const int rc = pthread_mutex_init((pthread_mutex_t*)m, &attr);
  pthread_mutexattr_destroy(&attr);
  return Result(rc);
}
int mtx_lock(mtx_t* m) { return Result(pthread_mutex_lock((pthread_mutex_t*)m)); }
int mtx_trylock(mtx_t* m) { return Result(pthread_mutex_trylock((pthread_mutex_t*)m)); }
int mtx_timedlock(mtx_t* restrict m, const struct timespec* restrict t) {
  return Result(pthread_mutex_timedlock((pthread_mutex_t*)m, t));
}
int mtx_unlock(mtx_t* m) { return Result(pthread_mutex_unlock((pthread_mutex_t*)m)); }
void mtx_destroy(mtx_t* m) { pthread_mutex_destroy((pthread_mutex_t*)m); }

int cnd_init(cnd_t* c) { return Result(pthread_cond_init((pthread_cond_t*)c, NULL)); }
int cnd_signal(cnd_t* c) { return Result(pthread_cond_signal((pthread_cond_t*)c)); }
int cnd_broadcast(cnd_t* c) { return Result(pthread_cond_broadcast((pthread_cond_t*)c)); }
int cnd_wait(cnd_t* c, mtx_t* m) {
  return Result(pthread_cond_wait((pthread_cond_t*)c, (pthread_mutex_t*)m));
}
int cnd_timedwait(cnd_t* restrict c, mtx_t* restrict m, const struct timespec* restrict t) {
  return Result(pthread_cond_timedwait((pthread_cond_t*)c, (pthread_mutex_t*)m, t));
}
void cnd_destroy(cnd_t* c) { pthread_cond_destroy((pthread_cond_t*)c); }
