"""Calls by the last name of their callee that take a value out of the computation: they show, log, plot or
write it. One vocabulary, split by what the call does, so that the analyses asking different questions
(does a forward's output end in a figure? is this call only a log line? does a host read feed a file?) agree
on the words they share.
"""

from __future__ import annotations

# Write an image file (`cv2.imwrite`, `torchvision.utils.save_image`, `plt.imsave`).
IMAGE_FILES = frozenset({"imwrite", "imsave", "save_image"})

# Draw a figure or log one (`plt.imshow`, `writer.add_image`).
FIGURES = frozenset({"imshow", "plot", "scatter", "savefig", "add_image", "add_images", "add_figure"})

# Make a host image of an array (`Image.fromarray`).
HOST_IMAGES = frozenset({"fromarray"})

# A forward's values end in a picture: its output is inference, not training.
PLOTS = IMAGE_FILES | FIGURES | HOST_IMAGES | frozenset(
    {"make_grid", "matshow", "hist", "title", "image_summary", "show_images", "draw"}
)

# Only print, log or show what they are given.
LOGS = IMAGE_FILES | FIGURES | frozenset(
    {"print", "log", "info", "debug", "warning", "add_scalar", "add_scalars", "add_histogram", "write",
     "set_postfix", "set_description"}
)

# Write a value to a file or make a host image of it (`np.save`, `csv_writer.writerow`).
FILE_WRITERS = IMAGE_FILES | HOST_IMAGES | frozenset(
    {"save", "savetxt", "savez", "savez_compressed", "tofile", "writerow"}
)
