/*
 * A fake libnvidia-ml.so.1 for CI: the few NVML entry points the heat guard
 * reaches through nvidia-ml-py, answering like an NVIDIA GB10 by default.
 *
 * Build:  gcc -shared -fPIC -O2 -Wall -Wextra -Werror -Wl,-soname,libnvidia-ml.so.1 \
 *             -o libnvidia-ml.so.1 fake_nvml.c
 * Use:    LD_LIBRARY_PATH=<dir of the build> python ...   (nvidia-ml-py dlopens "libnvidia-ml.so.1")
 *
 * State: the file named by FAKE_NVML_STATE, re-read on every call, one
 * `key=value` a line (a key may end in `.N` for GPU N only):
 *   temperature_c=52      GPU temperature in C (default 45)
 *   reasons=0x20          clock-event reasons mask (default 0)
 *   power_mw=35000        power draw in milliwatts (default 20000)
 *   devices=1             GPU count, 1 to 8 (default 1)
 *   profile=gb10          gb10: thresholds, margin and memory info NOT_SUPPORTED (as GB10);
 *                         full: all of them answer (a datacenter GPU);
 *                         old-driver: as gb10, without the newer temperature and clock-event calls
 *   driver=loaded         missing: every init fails with DRIVER_NOT_LOADED
 *   fail=temperature      queries that fail with GPU_IS_LOST: temperature, reasons, power (comma list)
 * FAKE_NVML_CALLS, when set, names a file that gets one line per call: the entry point's name.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvmlReturn_t;
typedef struct fake_device { unsigned int index; } *nvmlDevice_t;

enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_FUNCTION_NOT_FOUND = 13,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
    NVML_ERROR_UNKNOWN = 999,
};

enum { THRESHOLD_SHUTDOWN = 0, THRESHOLD_SLOWDOWN = 1, THRESHOLD_GPU_MAX = 3 };
#define MAX_DEVICES 8
#define TEMPERATURE_V1 0x100000Cu
#define MARGIN_TEMPERATURE_V1 0x1000008u
#define MEMORY_V2 0x02000028u

typedef struct { unsigned int version; int sensorType; int temperature; } nvmlTemperature_t;
typedef struct { unsigned int version; int marginTemperature; } nvmlMarginTemperature_t;
typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct { unsigned int version; unsigned long long total, reserved, free, used; } nvmlMemory_v2_t;

static struct fake_device devices[MAX_DEVICES];
static int initialised;

static void log_call(const char *name) {
    const char *path = getenv("FAKE_NVML_CALLS");
    if (!path || !*path) return;
    FILE *log = fopen(path, "a");
    if (!log) return;
    fprintf(log, "%s\n", name);
    fclose(log);
}

/* The value of `key` (or `key.N` for GPU `index` >= 0) in the state file, copied to out; 0 if absent. */
static int lookup(const char *key, int index, char *out, size_t size) {
    const char *path = getenv("FAKE_NVML_STATE");
    char line[256], wanted[64], specific[80];
    int found = 0;
    if (!path || !*path) return 0;
    FILE *state = fopen(path, "r");
    if (!state) return 0;
    snprintf(wanted, sizeof wanted, "%s=", key);
    snprintf(specific, sizeof specific, "%s.%d=", key, index);
    while (fgets(line, sizeof line, state)) {
        line[strcspn(line, "\r\n")] = '\0';
        const char *value = NULL;
        if (index >= 0 && strncmp(line, specific, strlen(specific)) == 0) {
            value = line + strlen(specific);
            found = 2;  /* the GPU's own line wins over the general one, wherever it is */
        } else if (found < 2 && strncmp(line, wanted, strlen(wanted)) == 0) {
            value = line + strlen(wanted);
            found = 1;
        }
        if (value) snprintf(out, size, "%s", value);
    }
    fclose(state);
    return found;
}

static unsigned long long number(const char *key, int index, unsigned long long fallback) {
    char value[64];
    return lookup(key, index, value, sizeof value) ? strtoull(value, NULL, 0) : fallback;
}

static int profile_is(const char *name) {
    char value[32];
    if (!lookup("profile", -1, value, sizeof value)) return strcmp(name, "gb10") == 0;
    return strcmp(value, name) == 0;
}

static int failing(const char *query) {
    char value[128];
    if (!lookup("fail", -1, value, sizeof value)) return 0;
    char *rest = NULL;
    for (char *word = strtok_r(value, ",", &rest); word; word = strtok_r(NULL, ",", &rest))
        if (strcmp(word, query) == 0) return 1;
    return 0;
}

static unsigned int device_count(void) {
    unsigned long long count = number("devices", -1, 1);
    return count > MAX_DEVICES ? MAX_DEVICES : (unsigned int)count;
}

/* NVML_SUCCESS for a handle this library gave out while initialised; else the error to return. */
static nvmlReturn_t check(nvmlDevice_t device) {
    if (!initialised) return NVML_ERROR_UNINITIALIZED;
    if (!device || device < devices || device >= devices + device_count()) return NVML_ERROR_INVALID_ARGUMENT;
    return NVML_SUCCESS;
}

static nvmlReturn_t init(const char *name) {
    char value[32];
    log_call(name);
    if (lookup("driver", -1, value, sizeof value) && strcmp(value, "missing") == 0) return NVML_ERROR_DRIVER_NOT_LOADED;
    for (unsigned int i = 0; i < MAX_DEVICES; i++) devices[i].index = i;
    initialised++;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlInit(void) { return init("nvmlInit"); }
nvmlReturn_t nvmlInit_v2(void) { return init("nvmlInit_v2"); }
nvmlReturn_t nvmlInitWithFlags(unsigned int flags) { (void)flags; return init("nvmlInitWithFlags"); }

nvmlReturn_t nvmlShutdown(void) {
    log_call("nvmlShutdown");
    if (!initialised) return NVML_ERROR_UNINITIALIZED;
    initialised--;
    return NVML_SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t result) {
    switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
    default: return "Unknown Error";
    }
}

static nvmlReturn_t text(const char *value, char *out, unsigned int length) {
    if (!out || strlen(value) + 1 > length) return NVML_ERROR_INVALID_ARGUMENT;
    memcpy(out, value, strlen(value) + 1);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    log_call("nvmlSystemGetDriverVersion");
    return initialised ? text("580.00-fake", version, length) : NVML_ERROR_UNINITIALIZED;
}

nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length) {
    log_call("nvmlSystemGetNVMLVersion");
    return initialised ? text("13.580.00-fake", version, length) : NVML_ERROR_UNINITIALIZED;
}

static nvmlReturn_t count(unsigned int *out) {
    if (!initialised) return NVML_ERROR_UNINITIALIZED;
    if (!out) return NVML_ERROR_INVALID_ARGUMENT;
    *out = device_count();
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount(unsigned int *out) { log_call("nvmlDeviceGetCount"); return count(out); }
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *out) { log_call("nvmlDeviceGetCount_v2"); return count(out); }

static nvmlReturn_t handle_by_index(unsigned int index, nvmlDevice_t *out) {
    if (!initialised) return NVML_ERROR_UNINITIALIZED;
    if (!out || index >= device_count()) return NVML_ERROR_INVALID_ARGUMENT;
    *out = &devices[index];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *out) {
    log_call("nvmlDeviceGetHandleByIndex");
    return handle_by_index(index, out);
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *out) {
    log_call("nvmlDeviceGetHandleByIndex_v2");
    return handle_by_index(index, out);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
    log_call("nvmlDeviceGetName");
    nvmlReturn_t ok = check(device);
    if (ok != NVML_SUCCESS) return ok;
    return text(profile_is("full") ? "NVIDIA H200" : "NVIDIA GB10", name, length);
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
    char value[64];
    log_call("nvmlDeviceGetUUID");
    nvmlReturn_t ok = check(device);
    if (ok != NVML_SUCCESS) return ok;
    snprintf(value, sizeof value, "GPU-00000000-fake-0000-0000-00000000000%u", device->index);
    return text(value, uuid, length);
}

static nvmlReturn_t temperature(nvmlDevice_t device, int sensor, int *out) {
    nvmlReturn_t ok = check(device);
    if (ok != NVML_SUCCESS) return ok;
    if (sensor != 0 || !out) return NVML_ERROR_INVALID_ARGUMENT;
    if (failing("temperature")) return NVML_ERROR_GPU_IS_LOST;
    *out = (int)number("temperature_c", (int)device->index, 45);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, int sensor, unsigned int *out) {
    int value = 0;
    log_call("nvmlDeviceGetTemperature");
    nvmlReturn_t ok = temperature(device, sensor, out ? &value : NULL);
    if (ok == NVML_SUCCESS) *out = (unsigned int)value;
    return ok;
}

nvmlReturn_t nvmlDeviceGetTemperatureV(nvmlDevice_t device, nvmlTemperature_t *out) {
    log_call("nvmlDeviceGetTemperatureV");
    if (profile_is("old-driver")) return NVML_ERROR_FUNCTION_NOT_FOUND;
    if (!out) return NVML_ERROR_INVALID_ARGUMENT;
    if (out->version != TEMPERATURE_V1) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    return temperature(device, out->sensorType, &out->temperature);
}

static nvmlReturn_t reasons(nvmlDevice_t device, unsigned long long *out) {
    nvmlReturn_t ok = check(device);
    if (ok != NVML_SUCCESS) return ok;
    if (!out) return NVML_ERROR_INVALID_ARGUMENT;
    if (failing("reasons")) return NVML_ERROR_GPU_IS_LOST;
    *out = number("reasons", (int)device->index, 0);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device, unsigned long long *out) {
    log_call("nvmlDeviceGetCurrentClocksEventReasons");
    if (profile_is("old-driver")) return NVML_ERROR_FUNCTION_NOT_FOUND;
    return reasons(device, out);
}

nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device, unsigned long long *out) {
    log_call("nvmlDeviceGetCurrentClocksThrottleReasons");
    return reasons(device, out);
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *out) {
    log_call("nvmlDeviceGetPowerUsage");
    nvmlReturn_t ok = check(device);
    if (ok != NVML_SUCCESS) return ok;
    if (!out) return NVML_ERROR_INVALID_ARGUMENT;
    if (failing("power")) return NVML_ERROR_GPU_IS_LOST;
    *out = (unsigned int)number("power_mw", (int)device->index, 20000);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTemperatureThreshold(nvmlDevice_t device, int threshold, unsigned int *out) {
    log_call("nvmlDeviceGetTemperatureThreshold");
    nvmlReturn_t ok = check(device);
    if (ok != NVML_SUCCESS) return ok;
    if (!out) return NVML_ERROR_INVALID_ARGUMENT;
    if (!profile_is("full")) return NVML_ERROR_NOT_SUPPORTED;
    switch (threshold) {
    case THRESHOLD_SHUTDOWN: *out = 95; return NVML_SUCCESS;
    case THRESHOLD_SLOWDOWN: *out = 92; return NVML_SUCCESS;
    case THRESHOLD_GPU_MAX: *out = 87; return NVML_SUCCESS;
    default: return NVML_ERROR_NOT_SUPPORTED;
    }
}

nvmlReturn_t nvmlDeviceGetMarginTemperature(nvmlDevice_t device, nvmlMarginTemperature_t *out) {
    log_call("nvmlDeviceGetMarginTemperature");
    nvmlReturn_t ok = check(device);
    if (ok != NVML_SUCCESS) return ok;
    if (!out) return NVML_ERROR_INVALID_ARGUMENT;
    if (out->version != MARGIN_TEMPERATURE_V1) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (!profile_is("full")) return NVML_ERROR_NOT_SUPPORTED;
    out->marginTemperature = 92 - (int)number("temperature_c", (int)device->index, 45);
    return NVML_SUCCESS;
}

/* Memory info: NOT_SUPPORTED on GB10 (unified memory); a guard must never depend on it. */
static nvmlReturn_t memory(nvmlDevice_t device, const void *out, unsigned long long *total,
                           unsigned long long *free, unsigned long long *used) {
    nvmlReturn_t ok = check(device);
    if (ok != NVML_SUCCESS) return ok;
    if (!out) return NVML_ERROR_INVALID_ARGUMENT;
    if (!profile_is("full")) return NVML_ERROR_NOT_SUPPORTED;
    *total = 141ULL << 30;
    *used = 1ULL << 30;
    *free = *total - *used;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *out) {
    nvmlMemory_t memo = {0, 0, 0};
    log_call("nvmlDeviceGetMemoryInfo");
    nvmlReturn_t ok = memory(device, out, &memo.total, &memo.free, &memo.used);
    if (ok == NVML_SUCCESS) *out = memo;
    return ok;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *out) {
    log_call("nvmlDeviceGetMemoryInfo_v2");
    if (out && out->version != MEMORY_V2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    nvmlMemory_v2_t memo = {MEMORY_V2, 0, 0, 0, 0};
    nvmlReturn_t ok = memory(device, out, &memo.total, &memo.free, &memo.used);
    if (ok == NVML_SUCCESS) *out = memo;
    return ok;
}
