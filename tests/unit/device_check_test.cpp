// device_check: each machine state a probe can report gives its own one-line message.
#include <catch2/catch.hpp>

#include "kernels/device/device_check.h"

namespace kiln {
namespace {

DeviceProbe usable_probe() {
  DeviceProbe p;
  p.driver_found = true;
  p.driver_version = 13000;
  p.runtime_version = 13000;
  p.device_count = 2;
  p.device_name = "NVIDIA H100 80GB HBM3";
  p.compute_major = 9;
  p.compute_minor = 0;
  p.min_compute_capability = 80;
  p.architectures = "80,90";
  return p;
}

std::string message_of(const DeviceProbe& p, int index = 0) {
  const Status st = device_check(p, index);
  return st ? std::string("ok") : st.message();
}

}  // namespace

TEST_CASE("device_check accepts a usable GPU", "[device]") {
  CHECK(device_check(usable_probe(), 0));
  CHECK(device_check(usable_probe(), 1));
  DeviceProbe ampere = usable_probe();
  ampere.compute_major = 8;
  ampere.compute_minor = 6;  // sm_80 code runs on 8.6
  CHECK(device_check(ampere, 0));
}

TEST_CASE("device_check names each way a GPU is missing or unusable", "[device]") {
  DeviceProbe p = usable_probe();
  SECTION("no driver library") {
    p.driver_found = false;
    const std::string m = message_of(p);
    CHECK(m.find("no NVIDIA driver") != std::string::npos);
    CHECK(m.find("libcuda.so.1") != std::string::npos);
    CHECK(m.find("--device cpu") != std::string::npos);
    CHECK(device_check(p, 0).code() == ErrorCode::unsupported);
  }
  SECTION("the toolkit's stub driver library") {
    p.driver_found = false;
    p.runtime_error = "the libcuda.so.1 found is the CUDA toolkit's stub";
    const std::string m = message_of(p);
    CHECK(m.find("no NVIDIA driver on this machine (the libcuda.so.1 found is the CUDA toolkit's stub)") != std::string::npos);
  }
  SECTION("a driver older than the runtime") {
    p.device_count = 0;
    p.driver_version = 12020;
    p.runtime_error = "cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime version";
    const std::string m = message_of(p);
    CHECK(m.find("driver is too old") != std::string::npos);
    CHECK(m.find("CUDA 12.2") != std::string::npos);
    CHECK(m.find("CUDA 13.0") != std::string::npos);
  }
  SECTION("another runtime failure") {
    p.device_count = 0;
    p.runtime_error = "cudaErrorDevicesUnavailable: all CUDA-capable devices are busy or unavailable";
    CHECK(message_of(p).find("devices are busy") != std::string::npos);
  }
  SECTION("zero devices") {
    p.device_count = 0;
    const std::string m = message_of(p);
    CHECK(m.find("no CUDA device") != std::string::npos);
    CHECK(m.find("CUDA_VISIBLE_DEVICES") != std::string::npos);
  }
  SECTION("an index past the devices") {
    const std::string m = message_of(p, 2);
    CHECK(m.find("CUDA device 2 does not exist") != std::string::npos);
    CHECK(m.find("shows 2") != std::string::npos);
  }
  SECTION("a compute capability below the oldest built") {
    p.device_name = "Tesla T4";
    p.compute_major = 7;
    p.compute_minor = 5;
    const std::string m = message_of(p);
    CHECK(m.find("'Tesla T4' has compute capability 7.5") != std::string::npos);
    CHECK(m.find("needs 8.0 or newer") != std::string::npos);
    CHECK(m.find("CMAKE_CUDA_ARCHITECTURES") != std::string::npos);
  }
}

TEST_CASE("device precisions round-trip their names", "[device]") {
  for (DevicePrecision p : {DevicePrecision::fp32, DevicePrecision::tf32, DevicePrecision::fp16, DevicePrecision::bf16})
    CHECK(device_precision_from_name(device_precision_name(p)) == p);
  CHECK_FALSE(device_precision_from_name("int8"));
}

}  // namespace kiln
