#!/bin/bash
# Opens relative to the cwd, a chdir, fds kept across fork and exec, dup,
# a pipe, a UDP socket, reads and writes counted per fd.
cd /tmp/wl
exec 3>out.txt
echo first >&3
exec 4<in.txt
exec 7<&4
read -r line <&7
exec 6<>/dev/udp/127.0.0.1/9
echo ping >&6
(cd sub && cat ../in.txt | wc -c >&3)
echo last >&3
exec cat in.txt
