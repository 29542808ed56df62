// The NVIDIA image a GPU Dockerfile copies the CUDA libraries from. The plugin's sonames give only
// the CUDA and cuDNN majors (libcublasLt.so.13, libcudnn.so.9), so the tag is a table of images
// whose contents were checked, one per (CUDA major, cuDNN major); anything else is left to the
// user (--build-arg CUDA_IMAGE) rather than guessed.
#include "containers/recipes/recipes.h"

namespace kiln::recipes {
namespace {

struct CudaBaseImage {
  int cuda_major;
  int cudnn_major;
  const char* image;
};

// 13.0.1-cudnn-runtime-ubuntu24.04: NVIDIA's Dockerfile for it adds the apt package
// libcudnn9-cuda-13 (9.13.0.50) to nvidia/cuda:13.0.1-runtime-ubuntu24.04. CUDA 13.0 is the
// release this machine's plugin is built with (its static cudart needs a driver >= 580 either
// way). cuDNN promises that a program built against 9.x runs on 9.y only for y >= x; the plugin
// calls the legacy convolution API, present since 9.0, and the image kiln builds itself carries
// the build machine's own cuDNN instead. A newer tag can be given with --build-arg CUDA_IMAGE.
constexpr CudaBaseImage kCudaBaseImages[] = {
    {13, 9, "nvidia/cuda:13.0.1-cudnn-runtime-ubuntu24.04"},
};

}  // namespace

std::string cuda_base_image(int cuda_major, int cudnn_major) {
  for (const CudaBaseImage& i : kCudaBaseImages)
    if (i.cuda_major == cuda_major && i.cudnn_major == cudnn_major) return i.image;
  return "";
}

std::string cuda_base_image_library_dir(std::string_view soname) {
  return soname.starts_with("libcudnn") ? "/usr/lib/x86_64-linux-gnu" : "/usr/local/cuda/lib64";
}

}  // namespace kiln::recipes
