"""Trial records: ROS 2 bags per trial, the independent scorer, summaries and reports."""
