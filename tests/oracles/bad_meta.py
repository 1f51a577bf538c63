# /// script
# [tool.bisector]
# timeout = "a while"
# ///
print("never runs")
