"""A change batch and its forms: JSON change rows, the typed batch (typed Arrow images per table layout), VARIANT
images, packed bytes, and the frames a mirror is handed -- each form read into the one the planner takes."""
