/* The settings table (config/options.h says who reads it). */
#include "config/options.h"

#include <string.h>

const vy_option_doc vy_options[] = {
	{"backend", "auto|cuda|host", "auto",
	 "which memory the files live in: cuda, a GPU through the CUDA driver; host, host memory; auto, cuda when a "
	 "driver and a GPU are present, else host (said once)"},
	{"ordinal", "N", "0", "which GPU, numbered as nvidia-smi -L lists them"},
	{"devices", "all|N[,N...]", "ordinal's one device",
	 "one mount over these GPUs: each has its own budget (resident_budget applies to each), pool and launcher; "
	 "new files go to their directory's user.vyre.device, else beside the directory's newest file while its device has room, else to the device with the most free room"},
	{"host_memory", "SIZE", "a quarter of RAM", "the host backend's capacity, from 1M to the machine's memory"},
	{"host_devices", "N", "1", "devices the host backend presents, 1 to 16, each of host_memory; without devices= the mount takes all of them"},
	{"peer", "on|off", "on", "copies between devices go device to device where the GPUs allow it; off: through host memory"},
	{"resident_budget", "SIZE|P%", "90%", "device bytes that files may use: a size, or a percentage of the device's memory"},
	{"pool_budget", "SIZE", "device memory / 32", "idle buffers kept for reuse; 0 turns the pool off"},
	{"staging_cache", "SIZE", "128M", "idle pinned host memory kept for transfers"},
	{"max_write", "SIZE", "1M", "the largest write request the kernel sends, 4K to 1M"},
	{"page_cache", "on|off", "on", "keep the kernel's page cache of a file across opens"},
	{"write_behind", "on|off", "on",
	 "acknowledge writes of up to 2 MiB once gathered in pinned host memory and copy them to the device "
	 "asynchronously; reads, control sequences, close and fsync wait for them, and a failed copy fails the "
	 "next write, read, close or fsync of that file; with survive=on the pinned memory is a region the keeper "
	 "holds, so a successor copies what was gathered"},
	{"readahead", "on|off", "on",
	 "copy a file read in order from the device 2 MiB ahead into pinned host memory and answer reads from there"},
	{"idle_threads", "N", "2",
	 "idle FUSE workers that wait on the kernel when requests come one at a time, 2 to 10; the others sleep, so "
	 "requests stay on hot workers; 0 is libfuse's own loop"},
	{"kernel_cache", "SIZE", "256M", "the CUDA JIT cache for modules (CUDA_CACHE_MAXSIZE, in ~/.cache/vyrefs); 0 turns it off"},
	{"allow_other", "on|off", "off",
	 "let other users reach the mount; a mount by a user other than root needs user_allow_other in /etc/fuse.conf"},
	{"vyre_dir", "hidden|visible", "hidden",
	 "whether the root's listings (ls -a, find, cp -a, tar, rsync) show the control directory .vyre, as ZFS's "
	 "snapdir; hidden, it is still reached by name (cd MNT/.vyre, cat MNT/.vyre/stats) and cannot be removed"},
	{"launch_timeout", "DURATION", "60s",
	 "a control sequence's time limit (500ms, 60s, 2m; a plain number is seconds): past it its launcher is "
	 "killed and the write fails with ETIMEDOUT; 0: no limit"},
	{"kernel_cflags", "OPTIONS", "none",
	 "NVRTC options for every CUDA C module (.cu) in .vyre/modules/, e.g. -use_fast_math; a module's first line "
	 "`// vyrefs: OPTIONS` adds its own"},
	{"xattr_budget", "SIZE", "64M",
	 "extended attributes of all files together (names and values; each file at most 1M, each value 64K) "
	 "and symlink targets: past it setxattr and symlink fail with ENOSPC, so no user can grow the daemon's memory"},
	{"max_inodes", "N", "half the pages of RAM",
	 "files, directories and links at most, each hard link past a file's first counted too, as tmpfs's nr_inodes "
	 "(df -i shows them): past it ENOSPC"},
	{"survive", "on|off", "on",
	 "a keeper process holds the mount and starts a successor when the daemon dies (crash, kill -9, the OOM "
	 "killer); programs see a pause, not an error. Files, names, attributes, xattrs, bytes and open files "
	 "survive, and a request caught mid-way gets its answer once (a ctl sequence caught running: EIO, saying "
	 "so); vyrefs --upgrade hands over to a new binary; mappings and loaded modules survive too. The keeper holds "
	 "an fd per piece of file memory (a file over 1 MiB, or 2 MiB of smaller ones) under the open-file limit "
	 "(at least 512; as root it raises it itself): a mount says how many pieces its limit holds, and past them "
	 "new files get ENOSPC with a Fix. It costs a keeper process, the log's host memory (survive_log) and, "
	 "with survive_standby, a CUDA context per GPU. off: a death ends the mount (ENOTCONN), as any FUSE "
	 "filesystem's. Not given, a mount whose GPU cannot share memory with another process (no VMM with POSIX "
	 "fd handles) is off, saying so; survive=on given, it fails"},
	{"survive_standby", "on|off", "on",
	 "survive=on: the keeper starts the next daemon ahead, its devices open (the CUDA driver's start, about "
	 "0.25 s of a takeover on a GPU), waiting for a death; it holds a CUDA context on each device while it "
	 "waits (nvidia-smi lists it). off: the successor starts after the death"},
	{"survive_log", "SIZE", "64M",
	 "survive=on: the log of namespace changes kept for a successor (a power of two, 64K to 1G); a checkpoint "
	 "of the whole namespace is written each time it is half full; an inode's xattrs must fit half of it, less "
	 "8 KiB (a setxattr past that gets ENOSPC, before anything changes)"},
	{"backing", "DIR", "none",
	 "mount over a directory (docs/tier.md): the mount shows DIR's tree, loads a file's bytes from DIR when "
	 "they are used, gives GPU memory back from the least recently used clean files when it is full, and "
	 "writes what is written back to DIR after writeback_delay; fsync, sync and umount wait for DIR. fstab's "
	 "source field may name DIR (an absolute path). With survive=on (the default) a daemon's death loses "
	 "nothing not yet written back: its successor writes it back"},
	{"writeback_delay", "DURATION", "5s",
	 "backing=DIR: how long written bytes wait on the GPU before they are written back to DIR (0: at once)"},
	{"config", "FILE", "/etc/vyrefs.conf if present",
	 "an INI file read before the other -o settings, which override it"},
};
const size_t vy_options_count = sizeof(vy_options) / sizeof(vy_options[0]);

const vy_option_doc *vy_option_find(const char *key)
{
	for (size_t i = 0; i < vy_options_count; i++)
		if (!strcmp(vy_options[i].key, key))
			return &vy_options[i];
	return NULL;
}
