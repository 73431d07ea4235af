/* POSIX ACLs in their xattr form: validation, the mode they give, chmod and
 * inheritance, as the kernel's fs/posix_acl.c does them for tmpfs. */
#include "ns/acl.h"

#include <endian.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* linux/posix_acl_xattr.h and linux/posix_acl.h (not in every libc's
 * headers, and fixed by the ABI). */
#define ACL_XATTR_VERSION 2u
#define TAG_USER_OBJ 0x01
#define TAG_USER 0x02
#define TAG_GROUP_OBJ 0x04
#define TAG_GROUP 0x08
#define TAG_MASK 0x10
#define TAG_OTHER 0x20
#define PERM_RWX 07

#define HEADER 4u
#define ENTRY 8u

bool vy_acl_name(const char *name)
{
	return !strcmp(name, VY_ACL_ACCESS) || !strcmp(name, VY_ACL_DEFAULT);
}

static unsigned tag_at(const unsigned char *v, size_t i)
{
	uint16_t t;
	memcpy(&t, v + HEADER + i * ENTRY, sizeof(t));
	return le16toh(t);
}

static unsigned perm_at(const unsigned char *v, size_t i)
{
	uint16_t p;
	memcpy(&p, v + HEADER + i * ENTRY + 2, sizeof(p));
	return le16toh(p);
}

static void set_perm(unsigned char *v, size_t i, unsigned perm)
{
	uint16_t p = htole16((uint16_t)perm);
	memcpy(v + HEADER + i * ENTRY + 2, &p, sizeof(p));
}

static size_t count_of(size_t size)
{
	return (size - HEADER) / ENTRY;
}

int vy_acl_valid(const void *value, size_t size)
{
	const unsigned char *v = value;
	if (!v || size < HEADER)
		return EINVAL;
	uint32_t version;
	memcpy(&version, v, sizeof(version));
	if (le32toh(version) != ACL_XATTR_VERSION)
		return EOPNOTSUPP; /* as posix_acl_from_xattr */
	if ((size - HEADER) % ENTRY != 0 || size == HEADER)
		return EINVAL;
	/* The states of posix_acl_valid: each tag may follow only those
	 * before it in this order; named entries need a mask. */
	enum { S_UOBJ, S_USER, S_GROUP, S_OTHER, S_DONE } state = S_UOBJ;
	bool needs_mask = false;
	for (size_t i = 0, n = count_of(size); i < n; i++) {
		if (perm_at(v, i) & ~PERM_RWX)
			return EINVAL;
		switch (tag_at(v, i)) {
		case TAG_USER_OBJ:
			if (state != S_UOBJ)
				return EINVAL;
			state = S_USER;
			break;
		case TAG_USER:
			if (state != S_USER)
				return EINVAL;
			needs_mask = true;
			break;
		case TAG_GROUP_OBJ:
			if (state != S_USER)
				return EINVAL;
			state = S_GROUP;
			break;
		case TAG_GROUP:
			if (state != S_GROUP)
				return EINVAL;
			needs_mask = true;
			break;
		case TAG_MASK:
			if (state != S_GROUP)
				return EINVAL;
			state = S_OTHER;
			break;
		case TAG_OTHER:
			if (state != S_OTHER && !(state == S_GROUP && !needs_mask))
				return EINVAL;
			state = S_DONE;
			break;
		default:
			return EINVAL;
		}
	}
	return state == S_DONE ? 0 : EINVAL;
}

int vy_acl_equiv_mode(const void *value, size_t size, mode_t *mode)
{
	const unsigned char *v = value;
	mode_t m = 0;
	int not_equiv = 0;
	for (size_t i = 0, n = count_of(size); i < n; i++) {
		mode_t p = perm_at(v, i) & PERM_RWX;
		switch (tag_at(v, i)) {
		case TAG_USER_OBJ:
			m |= p << 6;
			break;
		case TAG_GROUP_OBJ:
			m |= p << 3;
			break;
		case TAG_OTHER:
			m |= p;
			break;
		case TAG_MASK:
			m = (m & ~(mode_t)S_IRWXG) | (p << 3); /* the mask is the group bits */
			not_equiv = 1;
			break;
		default: /* named user or group */
			not_equiv = 1;
			break;
		}
	}
	*mode = (*mode & ~(mode_t)(S_IRWXU | S_IRWXG | S_IRWXO)) | m;
	return not_equiv;
}

void vy_acl_chmod(void *value, size_t size, mode_t mode)
{
	unsigned char *v = value;
	size_t group_obj = SIZE_MAX, mask = SIZE_MAX;
	for (size_t i = 0, n = count_of(size); i < n; i++) {
		switch (tag_at(v, i)) {
		case TAG_USER_OBJ:
			set_perm(v, i, (mode & S_IRWXU) >> 6);
			break;
		case TAG_GROUP_OBJ:
			group_obj = i;
			break;
		case TAG_MASK:
			mask = i;
			break;
		case TAG_OTHER:
			set_perm(v, i, mode & S_IRWXO);
			break;
		default:
			break;
		}
	}
	/* The group bits are the mask's where there is one. */
	size_t g = mask != SIZE_MAX ? mask : group_obj;
	if (g != SIZE_MAX)
		set_perm(v, g, (mode & S_IRWXG) >> 3);
}

/* posix_acl_create_masq: the ACL's entries masked by the mode and the
 * mode by them; 1 when the result says more than the mode. */
static int create_masq(unsigned char *v, size_t size, mode_t *mode_p)
{
	mode_t mode = *mode_p;
	size_t group_obj = SIZE_MAX, mask = SIZE_MAX;
	int not_equiv = 0;
	for (size_t i = 0, n = count_of(size); i < n; i++) {
		unsigned p = perm_at(v, i);
		switch (tag_at(v, i)) {
		case TAG_USER_OBJ:
			p &= (mode >> 6) & PERM_RWX;
			set_perm(v, i, p);
			mode &= ((mode_t)p << 6) | ~(mode_t)S_IRWXU;
			break;
		case TAG_USER:
		case TAG_GROUP:
			not_equiv = 1;
			break;
		case TAG_GROUP_OBJ:
			group_obj = i;
			break;
		case TAG_OTHER:
			p &= mode & PERM_RWX;
			set_perm(v, i, p);
			mode &= (mode_t)p | ~(mode_t)S_IRWXO;
			break;
		case TAG_MASK:
			mask = i;
			not_equiv = 1;
			break;
		}
	}
	size_t g = mask != SIZE_MAX ? mask : group_obj;
	if (g != SIZE_MAX) {
		unsigned p = perm_at(v, g) & ((mode >> 3) & PERM_RWX);
		set_perm(v, g, p);
		mode &= ((mode_t)p << 3) | ~(mode_t)S_IRWXG;
	}
	*mode_p = (*mode_p & ~(mode_t)(S_IRWXU | S_IRWXG | S_IRWXO)) | (mode & (S_IRWXU | S_IRWXG | S_IRWXO));
	return not_equiv;
}

int vy_acl_inherit(const void *dflt_value, size_t size, mode_t *mode, void **access, size_t *access_size,
		   void **dflt, size_t *dflt_size)
{
	*access = *dflt = NULL;
	*access_size = *dflt_size = 0;
	unsigned char *a = malloc(size);
	if (!a)
		return ENOMEM;
	memcpy(a, dflt_value, size);
	if (create_masq(a, size, mode)) {
		*access = a;
		*access_size = size;
	} else {
		free(a); /* the mode says it all: no access ACL */
	}
	if (S_ISDIR(*mode)) {
		void *d = malloc(size);
		if (!d) {
			free(*access);
			*access = NULL;
			*access_size = 0;
			return ENOMEM;
		}
		memcpy(d, dflt_value, size);
		*dflt = d;
		*dflt_size = size;
	}
	return 0;
}
