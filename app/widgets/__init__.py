"""Small reusable widgets shared by the pages."""
