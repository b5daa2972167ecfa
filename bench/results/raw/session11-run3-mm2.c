/* mapping vs pread: T threads take 2 MiB pieces of a page-cached file in
 * turn and copy each into their own buffer; then the mapping's munmap. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
enum { PIECE = 2 << 20 };
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e3+t.tv_nsec/1e6;}
static int fd; static size_t n; static const char *map; static atomic_size_t next; static int use_pread;
static void *worker(void *a){ (void)a; char *buf=aligned_alloc(4096,PIECE);
  for(;;){ size_t o=atomic_fetch_add(&next,PIECE); if(o>=n)break; size_t k=n-o<PIECE?n-o:PIECE;
    if(use_pread){ if(pread(fd,buf,k,o)!=(ssize_t)k)abort(); } else memcpy(buf,map+o,k); }
  free(buf); return NULL; }
int main(int c,char**v){ fd=open(v[1],O_RDONLY); struct stat st; fstat(fd,&st); n=st.st_size; int T=atoi(v[2]);
  for(int rep=0;rep<3;rep++) for(use_pread=0;use_pread<2;use_pread++){
    double t0=now(); map=mmap(NULL,n,PROT_READ,MAP_PRIVATE,fd,0); posix_madvise((void*)map,n,POSIX_MADV_SEQUENTIAL);
    atomic_store(&next,0); pthread_t th[64]; for(int i=0;i<T;i++)pthread_create(&th[i],0,worker,0); for(int i=0;i<T;i++)pthread_join(th[i],0);
    double t1=now(); munmap((void*)map,n); double t2=now();
    printf("%d threads, %s: copy %.1f ms (%.1f GB/s), munmap %.1f ms, total %.1f ms\n",T,use_pread?"pread  ":"mapping",t1-t0,n/(t1-t0)/1e6,t2-t1,t2-t0); }
}
