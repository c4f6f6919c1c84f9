/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Placeholder until this module lands. */
typedef int culpert__placeholder_livetable;
